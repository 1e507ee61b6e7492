package config

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Keys are one tenant's WeChat APIv3 keys, current first. In YAML it is a
// single key or a list of keys.
type Keys []Secret

// UnmarshalYAML accepts a scalar (one key) or a sequence of keys.
func (k *Keys) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*k = Keys{Secret(n.Value)}
		return nil
	case yaml.SequenceNode:
		out := make(Keys, 0, len(n.Content))
		for i, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: key %d is not a string", item.Line, i)
			}
			out = append(out, Secret(item.Value))
		}
		*k = out
		return nil
	default:
		return fmt.Errorf("line %d: %w", n.Line, errors.New("want a key or a list of keys"))
	}
}

// Reveal returns the keys' values in order. Call it only where the keys
// are used.
func (k Keys) Reveal() []string {
	out := make([]string, len(k))
	for i, s := range k {
		out[i] = s.Reveal()
	}
	return out
}

// String returns the keys masked, one "***" per key: "[*** ***]".
func (k Keys) String() string { return fmt.Sprint([]Secret(k)) }
