package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
)

// benchBatch is a batch of n distinct payments, an equal share per channel, at
// trade numbers from seq on.
func benchBatch(n, seq int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	chans := channels.Codes()
	for i := range msgs {
		tr := channelstest.NewTrade(chans[i%len(chans)], seq+i)
		msgs[i] = kafka.Message{
			Topic: "channel-events", Offset: int64(seq + i),
			Value: channelstest.PaymentEnvelope(tr, channelstest.Delivery{}),
		}
	}
	return msgs
}

// BenchmarkHandle measures the pipeline's own cost per message against
// MariaDB (the database's CPU is another process's): new events, and a
// replay where every message is a duplicate.
func BenchmarkHandle(b *testing.B) {
	const size = 256
	b.Run("new", func(b *testing.B) {
		env := newPipelineEnv(b)
		batches := make([][]kafka.Message, b.N)
		for i := range batches {
			batches[i] = benchBatch(size, i*size)
		}
		db := startServerMeter(b, env)
		b.ResetTimer()
		for i := range b.N {
			require.NoError(b, env.p.Handle(context.Background(), batches[i], make([]MessageState, size)))
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "µs/msg")
		db.report(b, b.N*size)
	})
	b.Run("replay", func(b *testing.B) {
		env := newPipelineEnv(b)
		msgs := benchBatch(size, 0)
		require.NoError(b, env.p.Handle(context.Background(), msgs, make([]MessageState, size)))
		db := startServerMeter(b, env)
		for b.Loop() {
			require.NoError(b, env.p.Handle(context.Background(), msgs, make([]MessageState, size)))
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "µs/msg")
		db.report(b, b.N*size)
	})
}

// serverMeter reads the local database server's CPU (from /proc) and its
// Questions counter, where the server runs on this machine.
type serverMeter struct {
	env       *pipelineEnv
	pid       int
	cpu       float64 // seconds
	questions int64
	self      time.Duration // this process's CPU
}

func startServerMeter(b *testing.B, env *pipelineEnv) *serverMeter {
	b.Helper()
	m := &serverMeter{env: env, pid: serverPID()}
	m.cpu, m.questions = m.read(b)
	m.self = selfCPU(b)
	return m
}

func (m *serverMeter) read(b *testing.B) (float64, int64) {
	b.Helper()
	var name string
	var q int64
	require.NoError(b, m.env.db.QueryRowContext(context.Background(), "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &q))
	if m.pid == 0 {
		return 0, q
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(m.pid), "stat"))
	require.NoError(b, err)
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, q
}

// report adds the server's CPU and statements per message; the server is
// shared, so other clients' work counts too.
func (m *serverMeter) report(b *testing.B, msgs int) {
	b.Helper()
	b.ReportMetric(float64((selfCPU(b)-m.self).Microseconds())/float64(msgs), "cpu-µs/msg")
	cpu, q := m.read(b)
	if m.pid != 0 {
		b.ReportMetric((cpu-m.cpu)*1e6/float64(msgs), "db-µs/msg")
	}
	b.ReportMetric(float64(q-m.questions-1)/float64(msgs), "stmts/msg")
}

// selfCPU is this process's user and system CPU so far.
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverPID finds a local mariadbd or mysqld, or 0.
func serverPID() int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
		if err == nil && (strings.TrimSpace(string(comm)) == "mariadbd" || strings.TrimSpace(string(comm)) == "mysqld") {
			return pid
		}
	}
	return 0
}
