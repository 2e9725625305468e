#!/usr/bin/env python3
"""The arithmetic of results/scale.md "Cluster plan" (issue 16 item 3). Every input is a named constant with its
source in results/scale.md; change one and rerun: python3 results/scale_plan.py"""

# --- model sizes (parameters) ---------------------------------------------------------------------------------
P_T5 = 223e6          # t5-base (inverter, corrector): all parameters, fp32 gradients are all-reduced
P_T5_ENC_NE = 85e6    # t5-base encoder without the shared 32128x768 embedding (24.7 M)
P_T5_DEC_NE = 113e6   # t5-base decoder without the embedding (self- and cross-attention, FFN)
P_HEAD = 24.7e6       # LM head (tied to the embedding): 32128 x 768
P_DAE = 15.3e6        # DAE, H 1024, depth 3, on 768-d
P_GTR_NE = 85e6       # gtr-t5-base = the t5-base encoder (110 M with the embedding) + a 768x768 dense

# --- workload (paper, reference notes §2.4; 7 M rows) -------------------------------------------------------------
ROWS = 7e6
T_REP = 16            # inverter: 16 repeat tokens from the embedding
L = 32                # tokens per text (the corpus keeps <= 32 words; paper msl 128 is an upper bound: x4)
BS = {"stage1": 160, "stage2": 384, "stage3": 160, "stage4": 400}
K_PROBES = 5          # stage 1/3 SURE: Hutchinson, K VJPs on one forward

# --- hardware (public figures; see results/scale.md) -------------------------------------------------------------
PEAK = {"H100": 989e12, "A100": 312e12}   # dense bf16 tensor FLOP/s (SXM)
MFU_TRAIN = 0.40      # assumed fraction of peak reached by a t5-base training step (not measured here)
MFU_EMBED = 0.30      # assumed for gtr-t5-base inference at short sequences
BUSBW_NVLINK = {"H100": 370e9, "A100": 230e9}  # NCCL ring all-reduce busbw inside one 8-GPU node
BUSBW_IB = {"H100": 45e9, "A100": 22e9}        # per GPU across nodes: one 400 (200) Gb/s NIC per GPU, ~90 % usable
GPU_PER_NODE = 8


def allreduce_s(nbytes, n_gpus, busbw):
    # NCCL: time = bytes / algbw, busbw = algbw * 2 (n - 1) / n
    return nbytes * 2 * (n_gpus - 1) / n_gpus / busbw if n_gpus > 1 else 0.0


def main():
    fwd_inv = 2 * (P_T5_ENC_NE * T_REP + (P_T5_DEC_NE + P_HEAD) * L)   # one example, forward
    train_inv = 3 * fwd_inv                                             # forward + backward ~ 3x forward
    fwd_gtr = 2 * P_GTR_NE * L
    train_dae = 3 * 2 * P_DAE * (1 + K_PROBES)                          # forward + K VJPs, backward of all
    per_example = {
        "stage1": train_dae,
        "stage2": train_inv,
        "stage3": train_inv + train_dae,
        "stage4": 2 * train_inv + 2 * fwd_gtr,   # corrector ~ inverter-sized encoder-decoder on 3x16 tokens
                                                 # + embedding each hypothesis (frozen gtr forward)
    }
    grads = {"stage1": P_DAE, "stage2": P_T5, "stage3": P_T5 + P_DAE, "stage4": P_T5}
    print(f"per-example FLOPs: inverter train {train_inv/1e9:.1f} G, gtr forward {fwd_gtr/1e9:.2f} G, "
          f"DAE SURE step {train_dae/1e9:.2f} G")
    for gpu in ("H100", "A100"):
        print(f"\n== {gpu}: peak {PEAK[gpu]/1e12:.0f} TF bf16, MFU {MFU_TRAIN}, NVLink busbw "
              f"{BUSBW_NVLINK[gpu]/1e9:.0f} GB/s, IB busbw/GPU {BUSBW_IB[gpu]/1e9:.0f} GB/s")
        t_cache = ROWS * fwd_gtr / (PEAK[gpu] * MFU_EMBED)
        print(f"cache precompute, 7 M texts: {t_cache:.0f} GPU-s -> {t_cache/8:.0f} s on 1 node, "
              f"{t_cache/8/4:.0f} s on 4 nodes (plus HDF5 writes: 7 M x 768 x 2 B = "
              f"{ROWS*768*2/1e9:.1f} GB float16)")
        print("stage  bs   bytes/step   compute/step on N nodes (ms) | all-reduce (ms) | all-reduce share")
        for st, bs in BS.items():
            nbytes = 4 * grads[st]
            line = f"{st:7s}{bs:4d} {nbytes/1e6:8.0f} MB "
            cross = None
            for nodes in (1, 2, 4, 8, 16):
                n = nodes * GPU_PER_NODE
                comp = bs * per_example[st] / (PEAK[gpu] * MFU_TRAIN) / n
                bw = BUSBW_NVLINK[gpu] if nodes == 1 else BUSBW_IB[gpu]
                ar = allreduce_s(nbytes, n, bw)
                share = ar / (ar + comp)
                if cross is None and ar > comp:
                    cross = nodes
                line += f"| N={nodes}: {comp*1e3:6.2f} / {ar*1e3:6.2f} ({100*share:3.0f} %) "
            print(line + f"| all-reduce > compute from N={cross} nodes (no overlap)")
        steps_epoch = {st: ROWS / bs for st, bs in BS.items()}
        for st in ("stage2", "stage3", "stage4"):
            t1 = steps_epoch[st] * BS[st] * per_example[st] / (PEAK[gpu] * MFU_TRAIN)
            print(f"{st}: one epoch over 7 M rows = {steps_epoch[st]:.0f} steps, {t1/3600:.2f} GPU-hours of "
                  f"compute ({t1/8/3600:.2f} h on one node if all-reduce overlaps)")
    # memory per GPU (training, AdamW, fp32 master weights, bf16 autocast)
    for st, p in (("stage2", P_T5), ("stage3", P_T5 + P_DAE), ("stage4", P_T5 + P_T5 + P_GTR_NE)):
        states = 16 * (P_T5 + (P_DAE if st == "stage3" else 0))  # weights + grads + 2 Adam moments, fp32
        frozen = 2 * (p - P_T5 - (P_DAE if st == "stage3" else 0))  # frozen models in bf16
        print(f"memory {st}: trained states {states/1e9:.1f} GB + frozen {frozen/1e9:.2f} GB + activations")


if __name__ == "__main__":
    main()
