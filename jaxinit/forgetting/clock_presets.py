"""Presets of the clock sweep and of the designs built on it (`python -m experiments.clocks --preset NAME`).

The designs (issue "designs that can decide each claim") run every point on several data splits
(`design.splits`) and add the verdicts of `jaxinit.forgetting.design`; each preset's line says what it
decides. Measured numbers: docs/forgetting.md.
"""
from __future__ import annotations

from dataclasses import replace

from jaxinit.config import ModelConfig, Preset, Presets
from jaxinit.forgetting.clocks import ClocksConfig, ClockSweep
from jaxinit.forgetting.design_config import DesignConfig
from jaxinit.forgetting.config import CPU_BASE, PAPER, SMOKE

SMOKE_CLOCKS = ClocksConfig(
    data=SMOKE.data, model=SMOKE.model, train=SMOKE.train, sweep=replace(SMOKE.sweep, optimizers=()),
    clocks=ClockSweep(families=("sgd", "adam"), sgd_lr=(0.02, 0.05), sgd_batch=(), adaptive_lr=(1e-3, 1e-2),
                      reference_lr=0.05))
# adam at T_adapt = 3.2 three ways: lr 1.6e-3 x 80 epochs (the lr sweep), 6.4e-3 x 20, 4e-4 x 320.
CPU_CLOCKS = ClocksConfig(clocks=ClockSweep(adam_lr_epochs=("0.0064@20", "0.0004@320")))
# The clock test (`clock_test`): low-LR SGD runs whose horizons hold equal T_SGD at different sum eta
# (lr x epochs 0.2 x 5, 0.1 x 20, 0.05 x 80, 0.025 x 320), equal sum eta at different T_SGD (0.2 x 20,
# 0.1 x 40, 0.05 x 80, 0.025 x 160) and equal lr and steps at batch 32 / 64 / 128; 5 seeds a point.
_TEST_TRAIN = replace(CPU_BASE.train, chunk=6, eval_batch_size=1600)
_TEST_SWEEP = replace(CPU_BASE.sweep, seeds=5, optimizers=())
CLOCK_TEST = ClocksConfig(train=_TEST_TRAIN, sweep=_TEST_SWEEP, clocks=ClockSweep(
    families=("sgd",), sgd_lr=(0.05,), sgd_batch=(), reference_lr=0.05,
    sgd_lr_epochs=("0.2@20", "0.1@40", "0.025@320", "0.05@20@32", "0.05@40@64")))
# Adam and Muon over 16x in lr for 40 epochs (their selected epochs fall within it on this MLP): do they
# collapse on the measured update clock T_update where they do not on T_adapt = sum eta?
ADAPTIVE_TEST = ClocksConfig(train=replace(_TEST_TRAIN, epochs=40), sweep=_TEST_SWEEP, clocks=ClockSweep(
    families=("adam", "muon"), adaptive_lr=(4e-4, 1.6e-3, 6.4e-3, 2.56e-2)))
PAPER_CLOCKS = ClocksConfig(
    data=PAPER.data, model=PAPER.model, train=PAPER.train, sweep=replace(PAPER.sweep, optimizers=()),
    clocks=ClockSweep(sgd_lr=(0.0025, 0.005, 0.01, 0.02, 0.04), sgd_batch=(32, 64, 256), reference_lr=0.01,
                      momentum_lr=(0.00025, 0.0005, 0.001, 0.002, 0.004),
                      sgd_l2_lambda=(1e-4, 5e-4, 2e-3, 1e-2), adaptive_lr=(1e-5, 1e-4, 1e-3, 1e-2)))
# ---- the designs (issue 32): every point on 6 data splits x 2 seeds (12 replicates, the split a random effect)
# The main job's base: MLP 3 x 128 + BatchNorm on 1,600 mnist1d examples (800 validation, 1,000 test).
_MAIN = replace(CPU_BASE.data, n_train=1600)
_DESIGN_TRAIN = replace(CPU_BASE.train, chunk=6, eval_batch_size=1600, checkpoint_every=50)
_DESIGN_SWEEP = replace(CPU_BASE.sweep, seeds=2, optimizers=())
_SPLITS = 6
# SGD forgetting and its clock (items 1 and 5 of the issue): b = 16 runs at lr 0.05 / 0.1 / 0.2 reach T_SGD up to
# 25 and sum eta up to 2,000, where the trajectory's memory falls (pilot: ~9 pp at T_SGD 1 to ~2 pp at 60). Pairs
# at equal T_SGD with sum eta 2x apart and at equal sum eta with T_SGD 2-4x apart, in the trained range; batch
# sizes 16 .. 256 at equal steps (2,400 at lr 0.1) and at equal T_SGD and sum eta (lr / b = 1/320, 200 epochs).
_B16 = ("sgd_lr0.05_b16_e200", "sgd_lr0.1_b16_e200", "sgd_lr0.2_b16_e100")
FORGET_SGD = ClocksConfig(
    data=_MAIN, train=replace(_DESIGN_TRAIN, epochs=200), sweep=_DESIGN_SWEEP,
    clocks=ClockSweep(families=("sgd",), sgd_lr=(0.1,), sgd_batch=(), reference_lr=0.1,
                      sgd_lr_epochs=("0.05@200@16", "0.1@200@16", "0.2@100@16", "0.1@50@32", "0.1@100@64",
                                     "0.1@400@256", "0.2@200@64", "0.8@200@256")),
    design=DesignConfig(
        splits=_SPLITS, rule="final", trained=0.99, evals=100, horizons=(24, 48, 50, 96, 100, 200, 400),
        pairs=(f"eqT_3.1=sgd_lr0.1_b16_e200@50/{_B16[0]}@200", f"eqT_12.5={_B16[2]}@50/{_B16[1]}@200",
               f"eqS_1000=sgd_lr0.1_b16_e200@100/{_B16[0]}@200", f"eqS_2000={_B16[2]}@100/{_B16[1]}@200",
               f"eqS_1000_T4x={_B16[2]}@50/{_B16[0]}@200",
               f"linear_b64={_B16[0]}@200/sgd_lr0.2_b64_e200@200", f"linear_b256={_B16[0]}@200/sgd_lr0.8_b256_e200@200"),
        batch_series=("equal_steps=sgd_lr0.1_b16_e200@24,sgd_lr0.1_b32_e50@48,sgd_lr0.1_b64_e100@96,sgd_lr0.1_b128@200,"
                      "sgd_lr0.1_b256_e400@400",
                      f"equal_T_SGD={_B16[0]}@200,sgd_lr0.2_b64_e200@200,sgd_lr0.8_b256_e200@200")))
# The confirmation of the clock forget_sgd's run suggested (sum eta / b, the exploratory candidate of
# design.EXPLORATORY; T_SGD, sum eta and steps lost to it there), stated before this run: with the curves each
# candidate traces on forget_sgd's trained cells, sum eta / b predicts the trained cells of these new points better
# than T_SGD (python -m jaxinit.forgetting.reanalyse runs/forget_sgd_confirm --fit-on runs/forget_sgd: the MSE
# difference T_SGD - sum eta / b has an interval above 0). Three points at sum eta / b ~ 15 with T_SGD 0.78, 6.25 and
# 12 (16x apart) and one at 7.5 with T_SGD 3.0; under T_SGD the first three differ by several pp, under sum eta / b
# they are equal (pairs eqSb_*).
FORGET_SGD_CONFIRM = ClocksConfig(
    data=_MAIN, train=replace(_DESIGN_TRAIN, epochs=200), sweep=_DESIGN_SWEEP,
    clocks=ClockSweep(families=("sgd",), sgd_lr=(0.4,), sgd_batch=(), reference_lr=0.4,
                      sgd_lr_epochs=("0.8@200@128", "0.05@200@32", "0.4@100@64")),
    design=DesignConfig(
        splits=_SPLITS, rule="final", trained=0.99, evals=100, horizons=(50, 100, 200),
        pairs=("eqSb_T8x=sgd_lr0.05_b32_e200@200/sgd_lr0.4_b64_e100@100",
               "eqSb_T16x=sgd_lr0.05_b32_e200@200/sgd_lr0.8_b128_e200@200")))
# L2 (item 2): sgd_l2 at b = 128 at equal lambda x eta (2e-3: lr 0.1 / lambda 0.02, the main job's, and lr 0.05 /
# lambda 0.04) and at half of it (lr 0.1 / lambda 0.01, twice the epochs): equal T_L2 = lambda sum eta with lambda and
# eta 2x apart; plain sgd at lr 0.1 the paired control. The paper's rule, trained cells: train acc at selection >= 99 %.
_L2 = ("sgd_l2_lr0.1_lam0.02_b128_e200", "sgd_l2_lr0.05_lam0.04_b128_e200", "sgd_l2_lr0.1_lam0.01_b128_e400")
FORGET_L2 = ClocksConfig(
    data=_MAIN, train=replace(_DESIGN_TRAIN, epochs=200), sweep=_DESIGN_SWEEP,
    clocks=ClockSweep(families=("sgd", "sgd_l2"), sgd_lr=(0.1,), sgd_batch=(), reference_lr=0.1, sgd_l2_lambda=(),
                      sgd_l2_runs=("0.1@0.02@200", "0.05@0.04@200", "0.1@0.01@400")),
    design=DesignConfig(
        splits=_SPLITS, rule="best_val", trained=0.99, evals=100, horizons=(50, 100, 150, 200, 300, 400),
        pairs=(f"eqTL2_eta_2.4={_L2[0]}@100/{_L2[1]}@100", f"eqTL2_eta_4.8={_L2[0]}@200/{_L2[1]}@200",
               f"eqTL2_lam_2.4={_L2[0]}@100/{_L2[2]}@200", f"eqTL2_lam_4.8={_L2[0]}@200/{_L2[2]}@400",
               f"l2_vs_sgd=sgd_lr0.1_b128@200/{_L2[0]}@200")))
# The adaptive claim at tuned rates (item 3): adam, adamw, muon, each its own lr from one grid chosen on validation.
ADAPTIVE_TUNED = ClocksConfig(
    data=_MAIN, train=replace(_DESIGN_TRAIN, epochs=60), sweep=_DESIGN_SWEEP,
    clocks=ClockSweep(families=("adam", "adamw", "muon"), adaptive_lr=(4e-4, 1.6e-3, 6.4e-3, 2.56e-2)),
    design=DesignConfig(splits=_SPLITS, rule="best_val", trained=0.9, tune=True, horizons=(30,)))

# The same on the ResNet-8 (8-16-32, 1-D convolutions on the same data): 3 sigma_w, 2 splits x 3 seeds, 80 epochs
# evaluated every 5 (the ResNet's evaluation costs ~4x its training on this CPU).
ADAPTIVE_TUNED_RESNET = ClocksConfig(
    data=_MAIN, model=ModelConfig(name="resnet8", width_mult=0.5),
    train=replace(_DESIGN_TRAIN, epochs=80, eval_every=5, checkpoint_every=20),
    sweep=replace(_DESIGN_SWEEP, sigma_w=(0.1, 0.6, 2.5), seeds=3),
    clocks=ClockSweep(families=("adam", "adamw", "muon"), adaptive_lr=(1e-3, 4e-3, 1.6e-2)),
    design=DesignConfig(splits=2, rule="best_val", trained=0.9, tune=True, horizons=(40,)))

# The designs' smallest: two sgd points on two splits x 2 seeds, a pair and a batch series (tests, seconds).
DESIGN_SMOKE = replace(SMOKE_CLOCKS, sweep=replace(SMOKE_CLOCKS.sweep, seeds=2), clocks=ClockSweep(
    families=("sgd",), sgd_lr=(0.05,), sgd_batch=(), reference_lr=0.05, sgd_lr_epochs=("0.1@3@32",)),
    design=DesignConfig(splits=2, trained=0.5, horizons=(3,), pairs=("eq=sgd_lr0.05_b64@2/sgd_lr0.1_b32_e3@1",),
                        batch_series=("b=sgd_lr0.05_b64@2,sgd_lr0.1_b32_e3@3",)))
PRESETS = Presets({
    "cpu": Preset(CPU_CLOCKS, "every family along its own clock: 40 points of 18 members on the forgetting cpu base; "
                              "~41 min on 2 cores"),
    "smoke": Preset(SMOKE_CLOCKS, "tests, seconds: sgd and adam at two learning rates each on the smoke setting"),
    "forget_sgd": Preset(FORGET_SGD, "clock test: which clock (T_SGD, sum eta, effective, steps) orders SGD's "
                                     "forgetting; batch 16-256 at equal steps / T_SGD; 6 splits x 2 seeds; ~40 min"),
    "forget_sgd_confirm": Preset(FORGET_SGD_CONFIRM, "confirmation: new sgd points at equal sum eta / b and T_SGD "
                                                     "16x apart, scored out of sample against forget_sgd; ~15 min"),
    "forget_l2": Preset(FORGET_L2, "L2: does it bring the spread to its null, on T_L2 or sum eta (equal T_L2, "
                                   "lambda and eta 2x apart); 6 splits x 2 seeds; ~25 min"),
    "adaptive_tuned": Preset(ADAPTIVE_TUNED, "adam, adamw, muon at tuned rates (one grid, chosen on "
                                             "validation) on the MLP; 6 splits x 2 seeds; ~35 min"),
    "adaptive_tuned_resnet": Preset(ADAPTIVE_TUNED_RESNET, "adam, adamw, muon at tuned rates on the ResNet-8; "
                                                           "3 sigma_w, 2 splits x 3 seeds; ~50 min"),
    "design_smoke": Preset(DESIGN_SMOKE, "tests, seconds: a design on 2 data splits x 2 seeds with a pair and a "
                                         "batch series"),
    "paper": Preset(PAPER_CLOCKS, "every family along its own clock on the paper setting (ResNet-9, CIFAR-10); "
                                  "accelerator"),
    "clock_test": Preset(CLOCK_TEST, "the clock test: low-LR sgd at equal T_SGD and at equal sum eta, 5 seeds; "
                                     "~10 min"),
    "adaptive_test": Preset(ADAPTIVE_TEST, "adam and muon over 16x in lr, 40 epochs: do they collapse on T_update? "
                                           "~13 min"),
})
