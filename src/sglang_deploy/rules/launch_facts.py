"""Facts the pre-launch rules read (rules.validate): a checkpoint's architecture and quantization from its
config.json (and hf_quant_config.json), and the GPU facts module's ``sglang_gpu``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..paths import read_bounded

# A checkpoint's config.json is a few KB; a quantization config listing every layer a few MB.
MAX_CONFIG_BYTES = 64 << 20


class ModelConfigError(ValueError):
    """A checkpoint config.json (or hf_quant_config.json) of the wrong shape."""


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelConfigError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _name(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ModelConfigError(f"{what} must be a string, not {type(value).__name__}")
    return value


def model_facts(config: Any, hf_quant: Any = None) -> dict[str, Any]:
    """model_architecture / model_quantization from a checkpoint's config.json (and hf_quant_config.json).
    Raises ModelConfigError for files of the wrong shape (the keys read by SGLang's ModelConfig)."""
    config = _mapping(config, "config.json")
    hf_quant = _mapping(hf_quant, "hf_quant_config.json")
    archs = config.get("architectures") or []
    if not isinstance(archs, list):
        raise ModelConfigError(f"config.json architectures must be a list, not {type(archs).__name__}")
    arch = _name(archs[0], "config.json architectures[0]") if archs else None
    qc = _mapping(config.get("quantization_config"), "config.json quantization_config") or _mapping(
        _mapping(config.get("text_config"), "config.json text_config").get("quantization_config"),
        "config.json text_config.quantization_config",
    )
    method = (_name(qc.get("quant_method"), "config.json quant_method") or "").lower() or None
    algo = _name(qc.get("quant_algo"), "config.json quant_algo") or _name(
        _mapping(hf_quant.get("quantization"), "hf_quant_config.json quantization").get("quant_algo"),
        "hf_quant_config.json quant_algo",
    )
    algo = (algo or "").upper()
    if method is None and hf_quant:
        method = "modelopt"
    if method == "modelopt" and algo:
        method = {"NVFP4": "modelopt_fp4", "FP8": "modelopt_fp8", "MIXED_PRECISION": "modelopt_mixed"}.get(algo, method)
    return {"model_architecture": arch, "model_quantization": method or "none"}


def read_json(path: Path, what: str) -> Any:
    """A JSON file, or ModelConfigError naming the file (unreadable, not a regular file, too large, not UTF-8, not
    JSON)."""
    try:
        data = read_bounded(path, MAX_CONFIG_BYTES, what)
    except OSError as exc:
        raise ModelConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ModelConfigError(str(exc)) from exc
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ModelConfigError(f"{path} is not UTF-8 JSON: {exc}") from exc


def model_facts_from_path(path: str | Path) -> dict[str, Any]:
    """model_facts() for a config.json file or a checkpoint directory holding one."""
    path = Path(path)
    config_file = path / "config.json" if path.is_dir() else path
    hf_quant_file = config_file.parent / "hf_quant_config.json"
    hf_quant = read_json(hf_quant_file, "the checkpoint's hf_quant_config.json") if hf_quant_file.exists() else None
    return model_facts(read_json(config_file, "a checkpoint's config.json or its folder"), hf_quant)


def gpu_facts(sglang_gpu: dict[str, Any] | None) -> dict[str, Any]:
    """Rule facts from the GPU facts module's ``sglang_gpu`` (count 0 = no GPU seen = unknown)."""
    if not sglang_gpu or not sglang_gpu.get("count"):
        return {}
    return {
        "gpu_arch": sglang_gpu.get("arch"),
        "gpu_count": int(sglang_gpu["count"]),
        "nvlink": sglang_gpu.get("nvlink"),
    }
