"""nki.collectives: not built in nki_lite yet (multi-rank execution needs a model of several devices).

Contract: every name of the reference's nki.collectives (all_reduce, all_gather, reduce_scatter,
all_to_all, collective_permute, rank_id, ReplicaGroup, ...) is importable and raises NL-E913 naming
the API when used.
"""
from .surface import fill

NOT_BUILT = fill(globals(), "nki.collectives")
