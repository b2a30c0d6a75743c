# Depth 2 in 3 blocks: `both` conjoins two depth-1 thresholds, which come out of the level-1 feed-forward
# layer, so the conjunction needs a second feed-forward sublayer: the compiler emits it as a block without
# attention between the two attention layers (docs/crasp.md, "Depth and layers").
alphabet a b
has_a = #"a" > 0
has_b = #"b" > 0
both = has_a && has_b
accept = #both > 2 && #"a" > 1
output accept
