"""The Hugging Face side of the t5_step_hf and generate_hf entries (issue 66): vec2text's inverter as vec2text builds
it, an embedding transform (Linear d->d, Dropout, GELU, Linear d->d_model*R) in front of transformers'
T5ForConditionalGeneration fed with inputs_embeds, loaded from the directory `bench_peers save` wrote (daei's T5
keeps Hugging Face's parameter names, so from_pretrained reads it unchanged).

  python hf_t5.py step --dir D [--steps 3] [--batch 64] [--label-len 32] [--amp off|bf16]
  python hf_t5.py generate --dir D [--steps 3] [--beams 1] [--no-repeat-ngram 0] [--repetition-penalty 1.0]

step: the eval-mode CE on the stored e_gen and labels (loss_eval, compared with daei's), then train mode: forward
(under torch.autocast('cpu', bfloat16) with --amp bf16) + backward + torch.optim.AdamW; e and labels drawn before
the clock, as daei's side. generate: model.generate() on the stored e_gen, eos forbidden
(min_length = max_length = label_len + 1), the first run's ids printed. One JSON line on stdout.
Runs in the peers' venv (bench/peers/setup.sh), 1 thread."""
import argparse
import json
import os
import resource
import time

import torch
import torch.nn as nn

from perfctl import perf_ctl


def load(d):
    from safetensors.torch import load_file
    from transformers import T5ForConditionalGeneration
    inv = json.load(open(os.path.join(d, "inverter", "inverter.json")))
    t5 = T5ForConditionalGeneration.from_pretrained(os.path.join(d, "inverter"))
    dim, R, dm = inv["dim"], inv["num_repeat_tokens"], t5.config.d_model
    proj = nn.Sequential(nn.Linear(dim, dim), nn.Dropout(t5.config.dropout_rate), nn.GELU(), nn.Linear(dim, dm * R))
    sd = {k.split("embedding_transform.", 1)[1]: v
          for k, v in load_file(os.path.join(d, "inverter", "embedding_transform.safetensors")).items()}
    proj.load_state_dict(sd, strict=True)
    return proj, t5, R, dm


def embeds(proj, e, R, dm):
    x = proj(e).reshape(e.shape[0], R, dm)
    return x, torch.ones(x.shape[:2], dtype=torch.long)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["step", "generate"])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--label-len", type=int, default=32)
    ap.add_argument("--amp", choices=["off", "bf16"], default="off")
    ap.add_argument("--beams", type=int, default=1)
    ap.add_argument("--no-repeat-ngram", type=int, default=0)
    ap.add_argument("--repetition-penalty", type=float, default=1.0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    proj, t5, R, dm = load(a.dir)
    out = dict(impl="transformers", mode=a.mode)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    times = []
    if a.mode == "step":
        from safetensors.torch import load_file
        inp = load_file(os.path.join(a.dir, "inputs.safetensors"))
        proj.eval(), t5.eval()  # the CE on the stored inputs, dropout off: compared with daei's
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            x, mask = embeds(proj, inp["e_gen"], R, dm)
            out["loss_eval"] = t5(inputs_embeds=x, attention_mask=mask, labels=inp["labels"]).loss.item()
        proj.train(), t5.train()
        opt = torch.optim.AdamW(list(proj.parameters()) + list(t5.parameters()), lr=1e-4)
        torch.manual_seed(1)
        losses = []
        V = t5.config.vocab_size
        for s in range(a.steps + 1):
            if s == 1:
                perf_ctl("enable")
            e = torch.randn(a.batch, proj[0].in_features)
            labels = torch.randint(2, V, (a.batch, a.label_len))
            t0 = time.perf_counter()
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.amp == "bf16"):
                x, mask = embeds(proj, e, R, dm)
                loss = t5(inputs_embeds=x, attention_mask=mask, labels=labels).loss
            loss.backward()
            opt.step()
            if s > 0:
                times.append(time.perf_counter() - t0)
            losses.append(loss.item())
        perf_ctl("disable")
        out.update(losses=losses, amp=a.amp)
    else:
        from safetensors.torch import load_file
        proj.eval(), t5.eval()
        e = load_file(os.path.join(a.dir, "inputs.safetensors"))["e_gen"]
        L = a.label_len + 1
        kw = dict(max_length=L, min_length=L, num_beams=a.beams, do_sample=False, early_stopping=False,
                  length_penalty=1.0, num_return_sequences=1, use_cache=True,
                  no_repeat_ngram_size=a.no_repeat_ngram, repetition_penalty=a.repetition_penalty)
        ids = None
        for s in range(a.steps + 1):
            if s == 1:
                perf_ctl("enable")
            t0 = time.perf_counter()
            with torch.no_grad():
                x, mask = embeds(proj, e, R, dm)
                seq = t5.generate(inputs_embeds=x, attention_mask=mask, **kw)
            if s > 0:
                times.append(time.perf_counter() - t0)
            if ids is None:
                ids = seq.tolist()
        perf_ctl("disable")
        out.update(ids=ids, beams=a.beams)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    out.update(times=times, minflt=ru1.ru_minflt - ru0.ru_minflt, maxrss_kb=ru1.ru_maxrss, torch=torch.__version__,
               threads=torch.get_num_threads())
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
