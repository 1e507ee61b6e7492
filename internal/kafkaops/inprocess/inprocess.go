package inprocess

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Start starts a one-broker kfake cluster with topics seeded: each topic
// name maps to its partition count. Close it when done.
func Start(topics map[string]int32, opts ...kfake.Opt) (*kfake.Cluster, []string, error) {
	all := []kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}
	for name, parts := range topics {
		all = append(all, kfake.SeedTopics(parts, name))
	}
	all = append(all, opts...)
	c, err := kfake.NewCluster(all...)
	if err != nil {
		return nil, nil, fmt.Errorf("start in-process kafka: %w", err)
	}
	return c, c.ListenAddrs(), nil
}
