// (aa)*: the non-empty words of a's of even length (coli-saar/c-rasp's aa_star, in verify-tf's .cr).
// Positions count from 0, so a word of even length ends at an odd position.
alphabet a b
odd(i) = i % 2 == 1                // a unary positional predicate: a boolean at every position
no_b_yet = #!"a" == 0
accept = no_b_yet && odd
