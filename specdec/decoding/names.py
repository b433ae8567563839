"""The drafts' names that the command line shows before anything heavy loads (`registry` builds them).

`specdec --help` must not wait for torch, which the registry's factories import; the registry checks that its
tables hold exactly these names, so each is written once.
"""

SHIPPED_DRAFTS: tuple[str, ...] = ("bigram", "int8", "int4", "ngram", "small", "int8-dynamic")  # `registry.DRAFTS`
ON_REQUEST: tuple[str, ...] = ("prompt-lookup", "shipped", "medusa", "eagle")  # by name only: the first of `registry.REGISTERED`
# The drafts that read the target, shipped for the shipped GPT: on request everywhere, and in a report of that
# model by default too (where their weights were trained for its checkpoint), so its headline places them
READ_THE_TARGET: tuple[str, ...] = ("medusa", "eagle")
