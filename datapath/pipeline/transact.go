package pipeline

import (
	"github.com/gswitch/gswitch/tables/rule"
)

// Transact runs f with the switch's write lock held: f applies FlowMods
// through apply (FlowMod without its own locking), and no batch is
// classified between two of them, so the datapath sees the tables as they
// were before f or as f leaves them. P4Runtime's DATAPLANE_ATOMIC batches
// (and their rollback) are made of it. f must not call the switch's other
// methods (the lock is not reentrant).
func (s *Switch) Transact(f func(apply func(*rule.FlowMod) error) error) error {
	defer s.unlockWrite(WriteTransaction, s.lockWrite())
	return f(s.flowModLocked)
}

// TransactGroups is Transact with group changes too: f applies FlowMods
// through flowMod and GroupMods through groupMod, all under the switch's
// write lock, so no batch of packets sees part of the change (the
// P4Runtime server's multicast groups and the entries that use them).
func (s *Switch) TransactGroups(f func(flowMod func(*rule.FlowMod) error, groupMod func(*rule.GroupMod) error) error) error {
	defer s.unlockWrite(WriteTransaction, s.lockWrite())
	return f(s.flowModLocked, s.groupModLocked)
}

// flowModLocked is FlowMod with s.mu held.
func (s *Switch) flowModLocked(fm *rule.FlowMod) error {
	switch fm.Command {
	case rule.FlowAdd:
		return s.addLocked(fm)
	case rule.FlowModify, rule.FlowModifyStrict:
		return s.modifyLocked(fm)
	case rule.FlowDelete, rule.FlowDeleteStrict:
		return s.deleteLocked(fm)
	}
	return rule.Errorf(rule.BadFlowCommand, "command %d", fm.Command)
}
