#include "daemon/control/formed_tree.h"

namespace plexus::daemon {
namespace {

// Place in the tree's order (the root first) and back.
size_t place_of(size_t index, size_t root) {
  if (index == root) return 0;
  return index < root ? index + 1 : index;
}
size_t index_of(size_t place, size_t root) {
  if (place == 0) return root;
  return place <= root ? place - 1 : place;
}

}  // namespace

std::vector<size_t> formed_children(size_t nodes, size_t root, size_t me, uint32_t fanout) {
  std::vector<size_t> out;
  if (nodes == 0 || root >= nodes || me >= nodes) return out;
  if (fanout == 0) {
    if (me != root) return out;
    for (size_t n = 0; n < nodes; ++n) {
      if (n != root) out.push_back(n);
    }
    return out;
  }
  const size_t first = place_of(me, root) * fanout + 1;
  for (size_t place = first; place < first + fanout && place < nodes; ++place) {
    out.push_back(index_of(place, root));
  }
  return out;
}

}  // namespace plexus::daemon
