"""Grammar text: one reader per dialect (GBNF, Lark with llguidance's extensions, regex) into one
grammar model, its printers, the names check (`resolve`) and the text-to-text converter.

Lint, convert, the independent Lark check and the backends' diagnostics all read grammars here;
no grammar library is imported.
"""
