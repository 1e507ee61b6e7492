package channels_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// BenchmarkParse decodes one realistic payment envelope per iteration on
// each channel, WeChat decryption included. It reports events/s of wall
// time and, because benchmarks often share a machine, events/cpu-s: events
// per second of CPU time the process used (GC included), the per-core
// figure.
func BenchmarkParse(b *testing.B) {
	for _, ch := range channels.Codes() {
		value := channelstest.PaymentEnvelope(channelstest.NewTrade(ch, 1), channelstest.Delivery{})
		d := testDecoder()
		b.Run(string(ch), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := d.Decode(value); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			if cpu > 0 {
				b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
			}
		})
	}
}

// cpuTime is the user+system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
