# shellcheck shell=bash
# Example: the paper's training scripts shrunk to one GPU and a tiny model (a smoke run that
# learns a little, not a reproduction). Source it, then pass the array to any train script:
#
#   source scripts/gpu/tiny_overrides.sh
#   MODEL=/tmp/cobalt-work/tiny-warm TRAIN_FILE=... VAL_FILE=... \
#       bash scripts/train_cobalt.sh "${TINY_OVERRIDES[@]}" trainer.total_training_steps=2
#
# It sets the launcher's variables ROLLOUT_TP and EVALUATOR_REPLICAS unless already set (the
# launcher counts the machine's GPUs when N_GPUS_PER_NODE is unset), and TINY_OVERRIDES, Hydra
# overrides applied after the run's own (docs/GPU.md):
# - 4 prompts x 4 samples a step, one mini-batch, 512 response tokens, prompts up to 4,096;
# - sdpa attention and no remove-padding: flash-attn is not in the offline package set, and
#   verl's default attention (flash_attention_2) and remove-padding path both need it;
# - no gradient checkpointing, no reference offload (the model is tiny), eager vLLM (no CUDA
#   graph capture at start), 40% of the GPU for vLLM;
# - learning rate 1e-5 (the paper's 1e-6 barely moves a tiny model in a few steps);
# - validate and save at step 2 only (no validation before training), keep 2 checkpoints.
# Any override given after these on the command line wins.

export ROLLOUT_TP="${ROLLOUT_TP:-1}"
export EVALUATOR_REPLICAS="${EVALUATOR_REPLICAS:-4}"
export VLLM_USE_FLASHINFER_SAMPLER="${VLLM_USE_FLASHINFER_SAMPLER:-0}"

TINY_OVERRIDES=(
    data.train_batch_size=4
    data.max_prompt_length=4096
    data.max_response_length=512
    actor_rollout_ref.rollout.n=4
    actor_rollout_ref.actor.ppo_mini_batch_size=4
    actor_rollout_ref.actor.optim.lr=1e-5
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192
    actor_rollout_ref.rollout.max_num_batched_tokens=8192
    actor_rollout_ref.rollout.gpu_memory_utilization=0.4
    actor_rollout_ref.rollout.enforce_eager=True
    +actor_rollout_ref.model.override_config.attn_implementation=sdpa
    actor_rollout_ref.model.use_remove_padding=False
    actor_rollout_ref.model.enable_gradient_checkpointing=False
    actor_rollout_ref.ref.fsdp_config.param_offload=False
    trainer.val_before_train=False
    trainer.test_freq=2
    trainer.save_freq=2
    trainer.max_actor_ckpt_to_keep=2
    # 16 cores: the evaluator's replicas, verl's reward workers and TransferQueue's storage
    # actors each take a CPU; with verl's defaults (8 + 8 + 8) the trainer waits forever
    reward.num_workers=2
    # one reward-component line per worker about every step (4 x 4 responses over 2 workers)
    +reward.reward_kwargs.log_every=8
    transfer_queue.backend.SimpleStorage.num_data_storage_units=1
)
