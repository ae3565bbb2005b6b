"""Secret-looking names are masked in what results and artifacts record."""

from sglang_deploy.secret_names import MASK, is_secret_name, mask


def test_secret_names():
    for name in ("HF_TOKEN", "SGLANG_API_KEY", "OPENAI_APIKEY", "db_password", "AWS_SECRET_ACCESS_KEY", "sglang_api_key"):
        assert is_secret_name(name), name
    for name in ("OMP_NUM_THREADS", "SGLANG_ENABLE_SPEC_V2", "CUDA_HOME", "sglang_benchmark_requests"):
        assert not is_secret_name(name), name


def test_mask_keeps_names_and_hides_values():
    env = {"OMP_NUM_THREADS": "16", "HF_TOKEN": "hf_abc", "WANDB_API_KEY": "k"}
    assert mask(env) == {"OMP_NUM_THREADS": "16", "HF_TOKEN": MASK, "WANDB_API_KEY": MASK}
    assert env["HF_TOKEN"] == "hf_abc"  # the input is left alone
