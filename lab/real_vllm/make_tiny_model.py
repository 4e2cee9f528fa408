"""Makes the lab's tiny real model offline (lab/lib/image.sh, build_vllm_layer).

A Llama-architecture model with random weights (safetensors, saved by transformers) and its own
byte-level BPE tokenizer trained with `tokenizers` on the small corpus below, a chat template in
tokenizer_config.json. Sizes are the smallest that vLLM 0.31's CPU backend and tensor parallel 2
accept: head_dim 64 (16 is refused: "Unsupported CPU attention configuration"), 2 attention heads
and 2 KV heads (divisible by TP=2). Its answers are random tokens: it proves the serving path,
not a language model. Deterministic (fixed seed), about 1 MB.

usage: python make_tiny_model.py OUTDIR
"""

import json
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CORPUS = [
    "The spark-cluster lab runs real vLLM on simulated DGX Spark nodes.",
    "Two nodes share one model with tensor parallel size two.",
    "Hello! How can I help you today?",
    "The quick brown fox jumps over the lazy dog.",
    "Ready. The answer is forty-two.",
    "user assistant system: say hello, answer briefly, count to ten.",
    "one two three four five six seven eight nine ten",
]
SPECIAL = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="</s>",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    vocab = 512
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=2048,
        bos_token_id=fast.convert_tokens_to_ids("<s>"),
        eos_token_id=fast.convert_tokens_to_ids("</s>"),
        pad_token_id=fast.convert_tokens_to_ids("</s>"),
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(
            "# lab/tiny-llama\n\nLAB model of the spark-cluster lab: Llama architecture, random weights, "
            "its own tokenizer trained on a few sentences (lab/real_vllm/make_tiny_model.py). "
            "Served by the real vLLM; its answers are random tokens.\n"
        )
    print(json.dumps({"dir": out, "params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
