package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/paycallback/paycallback/internal/kafkaops"
)

// ErrGroupActive is returned, wrapped, when the consumer group has live
// members and the operation needs it empty.
var ErrGroupActive = errors.New("consumer group has live members")

// requireEmptyGroup returns an error wrapping ErrGroupActive when the group
// has live members.
func requireEmptyGroup(ctx context.Context, k kafkaops.Kafka) error {
	st, err := k.DescribeGroup(ctx)
	if err != nil {
		return err
	}
	if len(st.Members) > 0 {
		return fmt.Errorf("group %s is %s with %d member(s), first %s (%s): stop every worker first: %w",
			k.Group, st.State, len(st.Members), st.Members[0].ClientID, st.Members[0].Host, ErrGroupActive)
	}
	return nil
}
