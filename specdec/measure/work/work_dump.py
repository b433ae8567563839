"""Reading a callgrind dump: a counted call's instructions split into the allocators' own, the type cache's
misses, and the rest (the verdict figure); and finding a region's dump by its name.

Part of the counting method (`work.py` loads it by path, as the ab worker and the asv harness load `work.py`):
the standard library only.
"""

from __future__ import annotations

import os
import re


# The allocators' own functions: their work follows the heap's history (glibc's bins and top chunk, pymalloc's
# pools and arenas), not the code that calls them, so two processes of one commit differ there and nowhere else
# (docs/work.md). A call's verdict figure leaves them out and they are shown apart. A change that allocates more
# still moves the verdict figure: the caller's own instructions, the object's initialisation and the
# deallocation's bookkeeping stay in it. One list, used by every count (`split_dump`).
GLIBC_ALLOCATOR = ("malloc", "free", "calloc", "realloc", "cfree", "__libc_malloc", "__libc_free", "__libc_calloc",
                   "__libc_realloc", "_int_malloc", "_int_free", "_int_realloc", "_int_memalign", "_mid_memalign",
                   "memalign", "__libc_memalign", "posix_memalign", "__posix_memalign", "aligned_alloc", "valloc",
                   "pvalloc", "sysmalloc", "systrim", "malloc_consolidate", "unlink_chunk", "tcache_init",
                   "tcache_get", "tcache_put", "alloc_perturb", "free_perturb", "munmap_chunk", "mremap_chunk",
                   "arena_get2", "_int_new_arena", "get_free_list", "malloc_trim", "__malloc_trim", "mtrim",
                   "__default_morecore", "sbrk", "__sbrk", "brk", "__brk", "mmap", "mmap64", "__mmap", "munmap",
                   "__munmap", "mremap", "__mremap", "madvise", "__madvise")
PYMALLOC = ("_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc", "_PyObject_Free", "pymalloc_alloc",
            "pymalloc_free", "pymalloc_realloc", "allocate_from_new_pool", "insert_to_usedpool", "insert_to_freepool",
            "new_arena", "_PyObject_ArenaMmap", "_PyObject_ArenaMunmap", "arena_map_get", "arena_map_mark_used",
            "address_in_range", "PyObject_Malloc", "PyObject_Calloc", "PyObject_Realloc", "PyObject_Free",
            "PyMem_Malloc", "PyMem_Calloc", "PyMem_Realloc", "PyMem_Free", "PyMem_RawMalloc", "PyMem_RawCalloc",
            "PyMem_RawRealloc", "PyMem_RawFree", "_PyMem_RawMalloc", "_PyMem_RawCalloc", "_PyMem_RawRealloc",
            "_PyMem_RawFree")
_GLIBC_OBJECT = re.compile(r"(^|/)libc[.-]")  # libc.so.6, libc-2.36.so


def allocator_function(obj: str, fn: str) -> bool:
    """Whether a function of a dump (its object file and name) is one of the allocators' own. A compiler's
    clone suffix (`unlink_chunk.constprop.0`, `_int_free.isra.0`) is the same function."""
    base = fn.split(".", 1)[0] if not fn.startswith(".") else fn
    if base in PYMALLOC:
        return True
    return base in GLIBC_ALLOCATOR and bool(_GLIBC_OBJECT.search(obj))


def _name(line: str, table: dict) -> str:
    """A name line's value with callgrind's string compression undone: `(12) name` defines 12, `(12)` uses it."""
    if line.startswith("("):
        ref, _, rest = line.partition(")")
        rest = rest.strip()
        if rest:
            table[ref] = rest
            return rest
        return table.get(ref, ref)
    return line


# The type-attribute cache's misses: `_PyType_Lookup` looks a name up in a 4096-slot cache indexed by the type's
# version tag XOR the name's address, and on a miss walks the MRO (`find_name_in_mro`, with its dict lookups)
# and tags the type (`assign_version_tag`). Which lookups collide follows the layout (code loaded, objects
# allocated before), not the code a call runs: code added anywhere moves a call's misses (docs/work.md). The
# misses' whole cost (inclusive: the walk's dict lookups too) is counted apart, like the allocators'.
LOOKUP_MISS = ("find_name_in_mro", "assign_version_tag")


def split_dump(path: str) -> dict:
    """One callgrind dump's instructions (Ir): {"total", "alloc", "lookup", "work"}. alloc: the allocators' own
    functions (`allocator_function`, exclusive cost); lookup: the type cache's misses (`LOOKUP_MISS`, inclusive
    cost of every call to them); work = total - alloc - lookup, the call's verdict figure. A cost line right
    after `calls=` is a callee's inclusive cost, not the caller's own; the functions' own costs are checked
    against the dump's `totals:` line."""
    if not os.path.exists(path):
        raise RuntimeError(f"no callgrind dump {path}: is the process running under callgrind?")
    total = alloc = lookup = 0
    positions, obj, fn, cfn, mine = 1, "", "", "", False
    after_calls = False
    objects: dict = {}
    functions: dict = {}
    stated = None
    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                if len(parts) <= positions:
                    continue
                n = int(parts[positions])
                if after_calls:  # the callee's inclusive cost at this call
                    after_calls = False
                    if cfn.split(".", 1)[0] in LOOKUP_MISS and fn.split(".", 1)[0] not in LOOKUP_MISS:
                        lookup += n
                    continue
                total += n
                if mine:
                    alloc += n
            elif line.startswith("fn="):
                fn = _name(line[3:].strip(), functions)
                mine = allocator_function(obj, fn)
            elif line.startswith("ob="):
                obj = _name(line[3:].strip(), objects)
            elif line.startswith("calls="):
                after_calls = True
            elif line.startswith("cfn="):
                cfn = _name(line[4:].strip(), functions)
            elif line.startswith("cob="):
                _name(line[4:].strip(), objects)
            elif line.startswith("positions:"):
                positions = len(line.split()) - 1
            elif line.startswith("totals:"):
                stated = int(line.split()[1])
    if stated is None:
        raise RuntimeError(f"{path}: no 'totals:' line in the callgrind dump")
    if stated != total:
        raise RuntimeError(f"{path}: its functions' costs add up to {total}, its totals line says {stated}")
    return {"total": total, "alloc": alloc, "lookup": lookup, "work": total - alloc - lookup}


def find_dump(prefix: str, name: str) -> str:
    """The dump among PREFIX.<n> whose trigger names the region `name` (callgrind writes the client request's
    string on its `desc: Trigger:` line)."""
    folder, base = os.path.split(prefix)
    want = f"{name}".encode()
    found = []
    for entry in os.listdir(folder or "."):
        if entry.startswith(base + ".") and entry[len(base) + 1:].isdigit():
            path = os.path.join(folder, entry)
            with open(path, "rb") as f:
                head = f.read(4096)
            for line in head.splitlines():
                if line.startswith(b"desc: Trigger:") and line.rstrip().endswith(want):
                    found.append(path)
    if len(found) != 1:
        raise RuntimeError(f"{len(found)} callgrind dumps of {prefix}.* name the region {name!r} (expected one): "
                           "is the process running under callgrind?")
    return found[0]
