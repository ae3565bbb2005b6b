#!/usr/bin/env python3
"""Make small model folders that real SGLang serves with ``--load-format dummy`` (no weights are fetched).

    python tools/make_models.py OUT_DIR        # writes OUT_DIR/dense and OUT_DIR/hybrid
    python tools/make_models.py OUT_DIR --large   # and OUT_DIR/dense-large, OUT_DIR/hybrid-large
    python tools/make_models.py OUT_DIR --shards 3 --shard-mb 4 --no-tokenizer   # with weight files (below)

* ``dense``: a Qwen3-style dense model (Qwen3ForCausalLM): hidden 1024, 8 layers, 16 heads, 8 KV heads,
  head_dim 128. For the readiness stages and the benchmark.
* ``dense-large`` (only with ``--large``): the same architecture in Qwen3-8B's shape (hidden 4096, 36 layers, 32
  heads, 8 KV heads; 14 GB in bf16), so decoding is bound by the GPU's memory bandwidth rather than by the host's
  CPU: the benchmark-parity figures (benchmarks/gpu_parity.py) use it.
* ``hybrid-large`` (only with ``--large``): the hybrid architecture in Qwen3-Next-80B-A3B's shape (hidden 2048, 48
  layers, head_dim 256, 16/32 linear-attention key/value heads, 10 of the experts per token) but 64 experts instead
  of 512: about 11.4B parameters (23 GB in bf16), so NEXTN's draft and verify steps are bound by the GPU, not by the
  host's CPU as with ``hybrid`` (benchmarks/gpu_parity.py --nextn).
* ``hybrid``: a Qwen3-Next-style hybrid model (Qwen3NextForCausalLM): Gated DeltaNet layers with a full
  attention layer every 4th (``full_attention_interval``), a small MoE, and one MTP layer
  (``mtp_num_hidden_layers``), so NEXTN speculative decoding and the mamba radix-cache strategies run.
  SGLang turns the same checkpoint into its draft model (sglang/srt/configs/model_config.py,
  ModelConfig.__init__: Qwen3NextForCausalLM -> Qwen3NextForCausalLMMTP for the draft).

Each folder gets a config.json, a byte-level BPE tokenizer trained here with the ``tokenizers`` package on a
built-in text (tokenizer.json, tokenizer_config.json with a ChatML chat template) and a generation_config.json.
Dummy weights are random: the models answer nonsense (see docs/gpu.md).

``--shards N`` also writes N safetensors files of pseudo-random bytes (``--shard-mb`` each; one U8 tensor per file,
not the model's tensors: a checkpoint to copy, lock and check, e.g. molecule/model, never to load) and
model.safetensors.index.json naming them. ``--no-tokenizer`` skips the tokenizer (no ``tokenizers`` package
needed): config.json then says vocab_size VOCAB_SIZE and token ids 0-2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

VOCAB_SIZE = 2048  # BPE target; config vocab_size is the trained size, so every id the model emits decodes
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Training text: plain English sentences, digits and punctuation (byte-level BPE encodes any text anyway).
_CORPUS_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "it",
    "he",
    "she",
    "they",
    "we",
    "you",
    "this",
    "which",
    "be",
    "are",
    "not",
    "or",
    "have",
    "his",
    "her",
    "their",
    "an",
    "were",
    "had",
    "been",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "first",
    "new",
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "name",
    "team",
    "minute",
    "idea",
    "body",
    "back",
    "parent",
    "face",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "capital",
    "France",
    "Paris",
    "sea",
    "count",
    "write",
    "short",
    "sentence",
    "answer",
    "model",
    "server",
    "token",
    "request",
    "output",
]


def corpus(lines: int = 4000) -> list[str]:
    """Deterministic sentences over _CORPUS_WORDS with numbers and punctuation."""
    out, state = [], 12345
    for i in range(lines):
        words = []
        for _ in range(8 + i % 9):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            words.append(_CORPUS_WORDS[state % len(_CORPUS_WORDS)])
        out.append(f"{' '.join(words).capitalize()}, {i % 100} and {(i * 7) % 1000}. What? Yes: 1, 2, 3!")
    return out


def train_tokenizer():
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def tokenizer_config() -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 8192,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "special": True,
                "normalized": False,
                "lstrip": False,
                "rstrip": False,
                "single_word": False,
            }
            for i, t in enumerate(SPECIAL_TOKENS)
        },
    }


def _common(tok) -> dict:
    return {
        "vocab_size": tok.get_vocab_size(),
        "bos_token_id": tok.token_to_id("<|endoftext|>"),
        "eos_token_id": tok.token_to_id("<|im_end|>"),
        "pad_token_id": tok.token_to_id("<|endoftext|>"),
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "max_position_embeddings": 8192,
        "initializer_range": 0.02,
        "use_cache": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
    }


def dense_config(tok) -> dict:
    """Qwen3ForCausalLM (sglang/srt/models/qwen3.py); head_dim 128 (the recipe's head_dim 64 crashed in graph capture)."""
    return {
        **_common(tok),
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "sliding_window": None,
        "use_sliding_window": False,
        "max_window_layers": 8,
    }


def dense_large_config(tok) -> dict:
    """dense_config in Qwen3-8B's shape (its vocabulary stays the small trained one)."""
    return {
        **dense_config(tok),
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_window_layers": 36,
    }


def hybrid_config(tok) -> dict:
    """Qwen3NextForCausalLM (sglang/srt/models/qwen3_next.py, configs/qwen3_next.py): the Qwen3-Next-80B-A3B
    config's keys, shrunk. Layers 0-2 are Gated DeltaNet (linear attention), layer 3 full attention."""
    return {
        **_common(tok),
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "hidden_size": 1024,
        "intermediate_size": 2048,
        "num_hidden_layers": 4,
        "full_attention_interval": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "partial_rotary_factor": 0.25,
        "rope_theta": 10000000.0,
        "rope_scaling": None,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 8,
        "linear_num_value_heads": 16,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "norm_topk_prob": True,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
    }


def hybrid_large_config(tok) -> dict:
    """hybrid_config in Qwen3-Next-80B-A3B's shape (its config.json), with 64 experts of its 512."""
    return {
        **hybrid_config(tok),
        "hidden_size": 2048,
        "intermediate_size": 5120,
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "num_experts": 64,
        "num_experts_per_tok": 10,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
    }


def write_model(folder: Path, config: dict, tok) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    (folder / "special_tokens_map.json").write_text(
        json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, indent=2) + "\n"
    )
    generation = {
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
        "do_sample": False,
    }
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    return folder


class _NoTokenizer:
    """Stands in for a trained tokenizer where none is written: the ids of SPECIAL_TOKENS and VOCAB_SIZE."""

    def get_vocab_size(self) -> int:
        return VOCAB_SIZE

    def token_to_id(self, token: str) -> int:
        return SPECIAL_TOKENS.index(token)


def write_weights(folder: Path, shards: int, shard_bytes: int, seed: int = 0) -> None:
    """shards safetensors files (one U8 tensor of shard_bytes pseudo-random bytes each) and their index."""
    import hashlib
    import struct

    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    weight_map = {}
    for i, name in enumerate(names):
        tensor = f"stand_in.{i}.weight"
        header = json.dumps({tensor: {"dtype": "U8", "shape": [shard_bytes], "data_offsets": [0, shard_bytes]}})
        header += " " * (-len(header) % 8)
        with open(folder / name, "wb") as handle:
            handle.write(struct.pack("<Q", len(header)) + header.encode())
            block = hashlib.sha256(f"{seed}-{i}".encode()).digest() * 2048  # 64 KiB, different per shard
            for start in range(0, shard_bytes, len(block)):
                handle.write(block[: shard_bytes - start])
        weight_map[tensor] = name
    index = {"metadata": {"total_size": shards * shard_bytes}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def write_config_only(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def make_models(
    out: Path, shards: int = 0, shard_bytes: int = 4 << 20, tokenizer: bool = True, large: bool = False
) -> dict[str, Path]:
    tok = train_tokenizer() if tokenizer else _NoTokenizer()
    write = (lambda folder, config: write_model(folder, config, tok)) if tokenizer else write_config_only
    made = {"dense": write(out / "dense", dense_config(tok)), "hybrid": write(out / "hybrid", hybrid_config(tok))}
    if large:
        made["dense-large"] = write(out / "dense-large", dense_large_config(tok))
        made["hybrid-large"] = write(out / "hybrid-large", hybrid_large_config(tok))
    for seed, folder in enumerate(made.values()):
        if shards:
            write_weights(folder, shards, shard_bytes, seed)
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder that receives dense/ and hybrid/")
    ap.add_argument("--shards", type=int, default=0, help="safetensors files of stand-in weights per model (0)")
    ap.add_argument("--shard-mb", type=float, default=4, help="size of each, in MiB (4)")
    ap.add_argument("--no-tokenizer", action="store_true", help="write no tokenizer (no tokenizers package needed)")
    ap.add_argument("--large", action="store_true", help="also write dense-large and hybrid-large (GPU-bound shapes)")
    args = ap.parse_args(argv)
    made = make_models(args.out, args.shards, int(args.shard_mb * (1 << 20)), not args.no_tokenizer, args.large)
    for name, path in made.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
