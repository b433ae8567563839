"""Small helpers every layer uses, written once: atomic writes and the cache folder."""
