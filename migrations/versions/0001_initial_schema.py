"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-30
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('project',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('api_key',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['project.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('key_hash')
    )
    op.create_table('run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('tags', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['project.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('project_id', 'name', name='uq_run_project_name')
    )
    op.create_table('alert',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('rule', sa.String(length=64), nullable=False),
    sa.Column('severity', sa.String(length=16), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('step_fired', sa.Integer(), nullable=False),
    sa.Column('step_resolved', sa.Integer(), nullable=True),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('evidence', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('alert', schema=None) as batch_op:
        batch_op.create_index('ix_alert_run_rule', ['run_id', 'rule'], unique=False)

    op.create_table('metric_point',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('value', sa.Float(), nullable=True),
    sa.Column('representation', sa.String(length=32), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'step', 'name', name='uq_metric_point_run_step_name')
    )
    with op.batch_alter_table('metric_point', schema=None) as batch_op:
        batch_op.create_index('ix_metric_point_run_name_step', ['run_id', 'name', 'step'], unique=False)

    op.create_table('rollout',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('rollout_id', sa.String(length=256), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False),
    sa.Column('env_id', sa.String(length=256), nullable=False),
    sa.Column('state_id', sa.String(length=256), nullable=False),
    sa.Column('reward', sa.Float(), nullable=False),
    sa.Column('success', sa.Boolean(), nullable=True),
    sa.Column('num_turns', sa.Integer(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'rollout_id', name='uq_rollout_run_rollout_id')
    )
    with op.batch_alter_table('rollout', schema=None) as batch_op:
        batch_op.create_index('ix_rollout_run_step', ['run_id', 'step'], unique=False)

    op.create_table('step',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False),
    sa.Column('num_rollouts', sa.Integer(), nullable=False),
    sa.Column('dirty', sa.Boolean(), nullable=False),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_rollout_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('claim_token', sa.String(length=64), nullable=True),
    sa.Column('claimed_by', sa.String(length=128), nullable=True),
    sa.Column('claim_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('scored_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('score_count', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'step', name='uq_step_run_step')
    )
    with op.batch_alter_table('step', schema=None) as batch_op:
        batch_op.create_index('ix_step_ready', ['dirty', 'claim_expires_at'], unique=False)

    op.create_table('turn',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('rollout_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('observation', sa.Text(), nullable=False),
    sa.Column('reasoning', sa.Text(), nullable=False),
    sa.Column('action', sa.Text(), nullable=False),
    sa.Column('reward', sa.Float(), nullable=False),
    sa.Column('done', sa.Boolean(), nullable=False),
    sa.Column('token_entropy', sa.Float(), nullable=True),
    sa.Column('num_tokens', sa.Integer(), nullable=True),
    sa.Column('logprob', sa.Float(), nullable=True),
    sa.Column('valid_format', sa.Boolean(), nullable=True),
    sa.ForeignKeyConstraint(['rollout_pk'], ['rollout.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('rollout_pk', 'index', name='uq_turn_rollout_index')
    )


def downgrade() -> None:
    op.drop_table('turn')
    with op.batch_alter_table('step', schema=None) as batch_op:
        batch_op.drop_index('ix_step_ready')

    op.drop_table('step')
    with op.batch_alter_table('rollout', schema=None) as batch_op:
        batch_op.drop_index('ix_rollout_run_step')

    op.drop_table('rollout')
    with op.batch_alter_table('metric_point', schema=None) as batch_op:
        batch_op.drop_index('ix_metric_point_run_name_step')

    op.drop_table('metric_point')
    with op.batch_alter_table('alert', schema=None) as batch_op:
        batch_op.drop_index('ix_alert_run_rule')

    op.drop_table('alert')
    op.drop_table('run')
    op.drop_table('api_key')
    op.drop_table('project')
