#include "daemon/control/formed_tree.h"

namespace plexus::daemon {
namespace {

// Place in the tree's order (the root first) and back; `root` may be `nodes` (not listed).
size_t place_of(size_t index, size_t root) {
  if (index == root) return 0;
  return index < root ? index + 1 : index;
}
size_t index_of(size_t place, size_t root) {
  if (place == 0) return root;
  return place <= root ? place - 1 : place;
}
size_t places(size_t nodes, size_t root) { return root == nodes ? nodes + 1 : nodes; }
bool valid(size_t nodes, size_t root, size_t me, uint32_t fanout) {
  return fanout > 0 && root <= nodes && me <= nodes && (me < nodes || me == root);
}

}  // namespace

std::vector<size_t> formed_children(size_t nodes, size_t root, size_t me, uint32_t fanout) {
  std::vector<size_t> out;
  if (!valid(nodes, root, me, fanout)) return out;
  const size_t first = place_of(me, root) * fanout + 1;
  for (size_t place = first; place < first + fanout && place < places(nodes, root); ++place) {
    out.push_back(index_of(place, root));
  }
  return out;
}

std::vector<size_t> formed_ancestors(size_t nodes, size_t root, size_t me, uint32_t fanout) {
  std::vector<size_t> out;
  if (!valid(nodes, root, me, fanout)) return out;
  for (size_t place = place_of(me, root); place != 0;) {
    place = (place - 1) / fanout;
    out.push_back(index_of(place, root));
  }
  return out;
}

}  // namespace plexus::daemon
