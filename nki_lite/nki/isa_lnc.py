"""nki.isa.core_barrier and nki.isa.sendrecv of the current dialect (LNC=2 synchronisation).

Contract: the reference's signatures (nki/api/nki/isa), forwarded to lang/isa_lnc.py, which traces them
into `core_barrier` / `sendrecv` IR instructions of one core's program; runtime/lnc.py runs the two
cores' programs and pairs them.
"""
from __future__ import annotations

from ..lang import isa_lnc as _lnc


def core_barrier(data, cores, engine=None, name=None):
    return _lnc.core_barrier(data, cores, engine=engine, name=name)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None, name=None):
    return _lnc.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=dma_engine, name=name)
