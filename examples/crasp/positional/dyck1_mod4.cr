// Dyck-1 words (a opens, b closes) whose length is a multiple of 4. Positions count from 0, so such a word
// ends at a position i with i % 4 == 3.
alphabet a b
length_multiple_of_4(i) = i % 4 == 3
opens = #"a"
closes = #"b"
dipped = #(closes > opens) > 0
accept = opens == closes && !dipped && length_multiple_of_4
