# The language of words ending in a: depth 0 (no counting), one feed-forward layer.
alphabet a b
accept = "a"
output accept
