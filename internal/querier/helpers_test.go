package querier_test

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counterValue reads one series of paycb_query_requests_total from reg;
// -1 when it is absent.
func counterValue(reg *prometheus.Registry, channel, answer string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != "paycb_query_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "channel") == channel && label(m, "answer") == answer {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
