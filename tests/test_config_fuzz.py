"""Generated settings: any config file, run config or length list either works or is one ExtrapError."""

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extrap.commands import args as types
from extrap.config import build_configs
from extrap.errors import ExtrapError
from extrap.run import RunConfig

MODEL_KEYS = ["vocab_size", "n_layer", "d_model", "n_head", "d_ff", "pe", "positions", "embed_std", "dropout",
              "attn_block", "attn_backend", "tie_embeddings", "bogus"]  # fmt: skip
TRAIN_KEYS = ["steps", "batch_size", "train_length", "lr", "warmup", "grad_clip", "seed", "corpus", "tokenizer",
              "threads", "task", "task_mix", "min_lr_ratio", "nonsense"]  # fmt: skip

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
sections = st.one_of(
    st.none(), st.lists(st.integers(), max_size=2), st.dictionaries(st.sampled_from(MODEL_KEYS + TRAIN_KEYS), values)
)
config_files = st.dictionaries(st.sampled_from(["model", "train", "study"]), sections, max_size=3)

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(config_files)
def test_any_config_file_builds_or_is_refused_in_one_line(config):
    try:
        model_cfg, train_cfg = build_configs("alibi", "smoke", config)
    except ExtrapError as e:
        assert "\n" not in str(e)
        return
    assert model_cfg.n_head > 0 and train_cfg.steps > 0 and math.isfinite(train_cfg.lr)


@FAST
@given(st.one_of(config_files, st.dictionaries(st.sampled_from(["format", "model", "train", "seed"]), values)))
def test_any_run_config_loads_or_is_refused_naming_the_file(d):
    try:
        cfg = RunConfig.from_json(json.loads(json.dumps(d, default=str)), "RUN/config.json")
    except ExtrapError as e:
        assert "RUN/config.json" in str(e) and "\n" not in str(e)
        return
    assert RunConfig.from_json(cfg.to_json()) == cfg


@FAST
@given(st.text(alphabet="0123456789,.-e+ x", max_size=30))
def test_any_length_list_parses_or_is_refused(text):
    import argparse

    try:
        lengths = types.lengths(text)
    except argparse.ArgumentTypeError:
        return
    assert lengths == sorted(set(lengths)) and all(2 <= L <= types.MAX_LENGTH for L in lengths)


@pytest.mark.parametrize("text", ["", ",", "1", "2.5", "1e9", "nan", "-4", "a"])
def test_length_lists_that_are_refused(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        types.lengths(text)
