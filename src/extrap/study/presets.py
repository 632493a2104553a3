"""What the study presets share: each experiment keeps its own presets in its package
(``extrap.experiments.<name>.presets``); several of them train the same small cpu model, :data:`CPU_MODEL`.
"""

from __future__ import annotations

# The model of several experiments' cpu presets: 3 layers, d = 64, 4 heads, lr 3e-3.
CPU_MODEL = {"n_layer": 3, "d_model": 64, "n_head": 4, "lr": 3e-3}
