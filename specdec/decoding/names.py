"""The drafts' names that the command line shows before anything heavy loads (`registry` builds them).

`specdec --help` must not wait for torch, which the registry's factories import; the registry checks that its
tables hold exactly these names, so each is written once.
"""

SHIPPED_DRAFTS: tuple[str, ...] = ("bigram", "int8", "int4", "ngram", "small", "int8-dynamic")  # `registry.DRAFTS`
ON_REQUEST: tuple[str, ...] = ("prompt-lookup", "shipped", "medusa", "eagle")  # by name only: the first of `registry.REGISTERED`
