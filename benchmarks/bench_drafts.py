"""What one drafted character costs, absolutely and as c (in single target passes), and how big drafts are."""

from .common import DRAFTS, THREADS, costs, draft, draft_character, fix_threads


class DraftCharacter:
    params = ([THREADS], DRAFTS)
    param_names = ["threads", "draft"]

    def setup(self, threads, name):
        fix_threads()
        self.call = draft_character(name)

    def time_draft_character(self, threads, name):
        self.call()


class DraftCost:
    """c = one drafted character / one single-position target pass, from round-robin samples.

    Tracked from each side's fastest sample: a median ratio moves with the machine's load between two
    commits' runs (by 10-15 % here, all drafts alike); the fastest samples are the least disturbed.
    """

    params = ([THREADS], DRAFTS)
    param_names = ["threads", "draft"]

    def setup_cache(self):
        return costs()

    def setup(self, cache, threads, name):
        if name not in cache["c"]:
            raise NotImplementedError(f"draft {name!r} does not exist at this commit")

    def track_c(self, cache, threads, name):
        return cache["c_fastest"][name]

    track_c.unit = "target passes"


class DraftSize:
    params = DRAFTS
    param_names = ["draft"]

    def setup(self, name):
        self.draft = draft(name)

    def track_weight_bytes(self, name):
        return self.draft.weight_bytes()

    track_weight_bytes.unit = "bytes"
