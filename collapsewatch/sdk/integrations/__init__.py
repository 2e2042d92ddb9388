"""Plug collapsewatch into the trainers people already run (docs/integrations.md).

- :mod:`~collapsewatch.sdk.integrations.trl`: ``CollapsewatchCallback`` for TRL's
  ``GRPOTrainer`` (rollouts through wrapped reward functions, TRL's metrics, a kill
  switch on chosen alerts). Needs ``transformers`` (and TRL to train).
- :mod:`~collapsewatch.sdk.integrations.verl`: ``VerlFollower`` tails verl's
  ``rollout_data_dir`` and file-logger metrics (``collapsewatch follow verl DIR``);
  ``stream_rewards`` wraps a verl reward function.
- :mod:`~collapsewatch.sdk.integrations.aliases`: the table that renames TRL's and
  verl's metric names to ours.
- Trajectory files in the chat-messages shape are read by the ``chat`` importer
  (:mod:`collapsewatch.importers.chat`; ``collapsewatch import FILE --format chat``).

Modules are imported on use, so that importing the SDK never imports a trainer.
"""
