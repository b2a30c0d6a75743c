# Dyck-1: balanced parentheses over ( and ) (depth 2).
# A word is balanced iff no prefix closes more parentheses than it opened
# and the whole word opens as many as it closes.
alphabet "(" ")"
balance = #"(" - #")"             # opened minus closed, up to here
dips = #(balance < 0)             # prefixes so far that closed too many
balanced = balance == 0 && dips == 0
output balanced
