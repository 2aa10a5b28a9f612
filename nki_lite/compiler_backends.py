"""nki_lite's `neuronxcc.nki.compiler.backends.neuron` (legacy): the two names kernels import from it.

Contract: public kernels (nki-samples' reference utilities) import `tensor.local_tile` and
`indexing.TileIndex` from the Neuron compiler's backend package and use them only as type
annotations. NKI does not document that package; nki_lite gives each name the nki_lite class it
stands for, so annotations and `isinstance` checks mean what they say:
- `local_tile`: an on-chip tile value (lang/tile.py `Tile`);
- `TileIndex`: a symbolic index expression, as `nl.arange` / `nl.mgrid` produce (lang/index.py `Index`).
`modules()` returns the module objects under their legacy dotted names (nki_lite/compat.py installs them).
"""
from __future__ import annotations

import types

from .lang.index import Index as TileIndex
from .lang.tile import Tile as local_tile

_BASE = "neuronxcc.nki.compiler.backends"


def modules() -> dict[str, types.ModuleType]:
    backends = types.ModuleType(_BASE, "nki_lite alias of the Neuron compiler's backends package")
    neuron = types.ModuleType(f"{_BASE}.neuron", "nki_lite alias: the Neuron backend (tensor, indexing)")
    tensor = types.ModuleType(f"{_BASE}.neuron.tensor", "nki_lite alias: local_tile is nki_lite's Tile")
    indexing = types.ModuleType(f"{_BASE}.neuron.indexing", "nki_lite alias: TileIndex is nki_lite's Index")
    tensor.local_tile = local_tile
    indexing.TileIndex = TileIndex
    backends.neuron, neuron.tensor, neuron.indexing = neuron, tensor, indexing
    return {m.__name__: m for m in (backends, neuron, tensor, indexing)}
