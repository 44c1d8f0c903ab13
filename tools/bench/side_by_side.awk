# Joins "size time busbw" rows of several runs (set peer=NAME before each file) into one
# side-by-side table with Plexus/peer ratios. Variables: title, stat (mean|median), peers
# (comma-separated display order, first is Plexus), labels (comma-separated column names).
{
  if (!($1 in seen)) { seen[$1] = 1; sizes[++size_count] = $1 }
  time_us[peer, $1] = $2
  busbw[peer, $1] = $3
}
function value(table_peer, size, which) {
  if (!((table_peer, size) in busbw)) return "-"
  return which == "time" ? sprintf("%.2f", time_us[table_peer, size]) \
                         : sprintf("%.3f", busbw[table_peer, size])
}
function ratio(size, other) {
  if (!((order[1], size) in busbw) || !((other, size) in busbw)) return "-"
  if (busbw[other, size] + 0 <= 0 || busbw[order[1], size] + 0 <= 0) return "-"
  return sprintf("%.2fx", busbw[order[1], size] / busbw[other, size])
}
function time_ratio(size, other) {
  if (!((order[1], size) in time_us) || !((other, size) in time_us)) return "-"
  if (time_us[order[1], size] + 0 <= 0) return "-"
  return sprintf("%.2fx", time_us[other, size] / time_us[order[1], size])
}
END {
  count = split(peers, order, ",")
  split(labels, label, ",")
  for (i = 2; i <= size_count; i++) {
    key = sizes[i]
    for (j = i - 1; j >= 1 && sizes[j] + 0 > key + 0; j--) sizes[j + 1] = sizes[j]
    sizes[j + 1] = key
  }
  printf "\n# %s: out-of-place busbw (GB/s), higher is better\n", title
  line = sprintf("# %10s  %9s", "size (B)", label[1])
  for (p = 2; p <= count; p++) line = line sprintf("  %9s  %12s", label[p], label[1] "/" label[p])
  print line
  for (i = 1; i <= size_count; i++) {
    s = sizes[i]
    line = sprintf("%12s  %9s", s, value(order[1], s, "bw"))
    for (p = 2; p <= count; p++) line = line sprintf("  %9s  %12s", value(order[p], s, "bw"), ratio(s, order[p]))
    print line
  }
  if (stat == "median") {
    printf "\n# %s: out-of-place median time (us), lower is better\n", title
    line = sprintf("# %10s  %9s", "size (B)", label[1])
    for (p = 2; p <= count; p++) line = line sprintf("  %9s  %12s", label[p], label[p] "/" label[1])
    print line
    for (i = 1; i <= size_count; i++) {
      s = sizes[i]
      line = sprintf("%12s  %9s", s, value(order[1], s, "time"))
      for (p = 2; p <= count; p++) line = line sprintf("  %9s  %12s", value(order[p], s, "time"), time_ratio(s, order[p]))
      print line
    }
  }
}
