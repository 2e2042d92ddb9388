"""cross scores, truncation flag, unique alerts

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""
from alembic import op
import sqlalchemy as sa

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

def upgrade() -> None:
    op.create_table('cross_score',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False),
    sa.Column('rollout_ids', sa.JSON(), nullable=False),
    sa.Column('state_ids', sa.JSON(), nullable=False),
    sa.Column('num_tokens', sa.JSON(), nullable=False),
    sa.Column('logprob_sum', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'step', name='uq_cross_score_run_step')
    )
    with op.batch_alter_table('alert', schema=None) as batch_op:
        batch_op.create_unique_constraint('uq_alert_run_rule_step', ['run_id', 'rule', 'step_fired'])

    with op.batch_alter_table('rollout', schema=None) as batch_op:
        batch_op.add_column(sa.Column('truncated', sa.Boolean(), nullable=True))

def downgrade() -> None:
    with op.batch_alter_table('rollout', schema=None) as batch_op:
        batch_op.drop_column('truncated')

    with op.batch_alter_table('alert', schema=None) as batch_op:
        batch_op.drop_constraint('uq_alert_run_rule_step', type_='unique')

    op.drop_table('cross_score')
