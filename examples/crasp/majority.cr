# Majority: strictly more a's than b's (depth 1).
alphabet a b
na = #"a"           # number of a's so far
nb = #"b"           # number of b's so far
majority = na > nb
output majority
