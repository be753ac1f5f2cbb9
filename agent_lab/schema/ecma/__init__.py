"""ECMA-262 regular expressions, read into a tree: `errors` (what is refused, and the limits),
`ranges` (sets of code points and their Python spelling), `unicode` (the ``\\p{...}`` tables), `tree`
(the parse tree and its Python source), `parser` (the grammar) and `captures` (the backreferences that
would read a capture ECMA resets and Python's re keeps). `agent_lab.schema.ecma_regex` is
the public face: parse, translate, compile, check."""
