# min, max and conditionals (depth 2): the a's and b's differ by at most 2, the current letter is the
# strictly more frequent one so far, and there were at least three a's.
alphabet a b
na = #"a"
nb = #"b"
close = max(na - nb, nb - na) <= 2      # |na - nb| <= 2
mine = "a" ? na : nb                    # the count of the current letter
ahead = mine > min(na, nb)              # ... is the larger count
three = #(na >= 3) > 0                  # at least three a's so far
accept = close && ahead && three
output accept
