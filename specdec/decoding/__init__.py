"""Speculative decoding itself: drafts and their registry, the accept/reject rule, token trees, and the
generation loops (`generate`, `speculative_generate`)."""
