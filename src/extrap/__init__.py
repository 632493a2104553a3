"""extrap: length extrapolation of transformer language models."""

from extrap.version import __version__


def load(source, device: str | None = None, **hf_options):
    """Load a trained run: ``model, tokenizer, config = extrap.load(RUN_DIR)``, or use the returned
    :class:`extrap.run.Run` (``.model``, ``.tokenizer``, ``.config``, ``.train_length``, ...).

    ``source`` may be ``hf:PATH``, a local Hugging Face checkpoint (``hf_options``: dtype, rope,
    factor, train_length, corpus; see :func:`extrap.hf.load_hf`).
    """
    from extrap.run import load as load_run

    return load_run(source, device, **hf_options)


__all__ = ["__version__", "load"]
