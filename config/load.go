package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LookupEnv looks up one environment variable; os.LookupEnv has this shape.
// Tests pass a map-backed function so they never touch the process
// environment.
type LookupEnv func(name string) (value string, ok bool)

// EnvVars returns the names of every environment variable ApplyEnv reads,
// in a stable order, for help text and documentation checks.
func EnvVars() []string {
	out := make([]string, 0, len(settings)+3)
	for _, s := range settings {
		if s.env != "" {
			out = append(out, s.env)
		}
		if s.file {
			out = append(out, s.env+"_FILE")
		}
	}
	return out
}

// ApplyEnv overrides c with the environment variables lookup reports. A
// variable that is unset or set to the empty string leaves the field as it
// is (so `PAYCB_KAFKA_DLQ_TOPIC=` keeps the derived default). It reports
// every unparsable variable at once, naming it; secret values are never
// quoted.
func (c *Config) ApplyEnv(lookup LookupEnv) error {
	if lookup == nil {
		return nil
	}
	var errs []error
	for i := range settings {
		s := &settings[i]
		if s.env == "" {
			continue
		}
		v, ok := lookup(s.env)
		if s.file {
			var err error
			if v, ok, err = fromFile(lookup, s.env, v, ok && v != ""); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if !ok || v == "" {
			continue
		}
		if err := s.set(c, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.env, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("apply environment: %w", errors.Join(errs...))
	}
	return nil
}

// fromFile applies the NAME_FILE convention for the secret variable name:
// when NAME_FILE is set, the value is the named file's content less one
// trailing newline. Setting both NAME and NAME_FILE is an error. set reports
// whether NAME itself is set.
func fromFile(lookup LookupEnv, name, value string, set bool) (string, bool, error) {
	path, ok := lookup(name + "_FILE")
	if !ok || path == "" {
		return value, set, nil
	}
	if set {
		return "", false, fmt.Errorf("%s and %s_FILE are both set: keep one", name, name)
	}
	data, err := os.ReadFile(filepath.Clean(path)) // the operator names the file
	if err != nil {
		return "", false, fmt.Errorf("%s_FILE: %w", name, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if v == "" {
		return "", false, fmt.Errorf("%s_FILE: %s is empty", name, path)
	}
	return v, true, nil
}

// LoadYAML overrides c with the fields present in data, a YAML document in
// the shape of config/consumer.example.yaml. Fields absent from data keep
// their values; unknown fields are an error, so a typo never silently falls
// back to a default. An empty document changes nothing.
func (c *Config) LoadYAML(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode yaml: %w", redactYAMLError(err))
	}
	return nil
}

// yamlQuoted matches the values yaml quotes in backticks in its type errors
// ("cannot unmarshal !!str `...` into int").
var yamlQuoted = regexp.MustCompile("`[^`]*`")

// redactYAMLError hides the values yaml quotes in its messages: the value
// may be a secret written in the wrong place (a key where a map belongs). The
// line number and the target type still locate the mistake.
func redactYAMLError(err error) error {
	msg := err.Error()
	redacted := yamlQuoted.ReplaceAllString(msg, "(value hidden)")
	if redacted == msg {
		return err
	}
	return errors.New(redacted)
}

// LoadFile overrides c with the YAML file at path (see LoadYAML). The error
// names the file.
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(filepath.Clean(path)) // the operator names the file
	if err != nil {
		return fmt.Errorf("read config file: %w", err)
	}
	if err := c.LoadYAML(data); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// Flags are the command-line flags registered by RegisterFlags. Only flags
// given on the command line override the configuration: their defaults are
// for -help only.
type Flags struct {
	fs         *flag.FlagSet
	configFile string
	values     map[string]*flagValue
}

// flagValue is a flag.Value that checks its syntax when set and keeps the raw
// text for Apply. String masks secrets, since flag prints it.
type flagValue struct {
	s   *setting
	raw string
	def string
}

func (v *flagValue) String() string {
	if v == nil {
		return ""
	}
	if v.s.secret && v.raw != "" {
		return masked
	}
	if v.raw == "" {
		return v.def
	}
	return v.raw
}

func (v *flagValue) Set(s string) error {
	scratch := Default()
	if err := v.s.set(&scratch, s); err != nil {
		return err
	}
	v.raw = s
	return nil
}

// RegisterFlags registers --config and the configuration flags on fs:
// --kafka-brokers, --kafka-topic, --kafka-group, --kafka-dlq-topic,
// --db-dsn, --admin-addr, --log-level, --log-format, --batch-max,
// --orphan-after and --shutdown-timeout. Their parse errors surface from
// fs.Parse. Call it once per FlagSet; registering twice panics, as flag does.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	fl := &Flags{fs: fs, values: make(map[string]*flagValue)}
	fs.StringVar(&fl.configFile, "config", DefaultFile, "YAML configuration file (read only when present unless given explicitly)")
	def := Default()
	for i := range settings {
		s := &settings[i]
		if s.flag == "" {
			continue
		}
		v := &flagValue{s: s}
		if !s.secret {
			v.def = s.text(&def)
		}
		fl.values[s.flag] = v
		fs.Var(v, s.flag, s.usage+" (env "+s.env+")")
	}
	return fl
}

// ConfigFile returns the configuration file to read and whether it was
// given explicitly with --config. Without --config it is DefaultFile.
func (f *Flags) ConfigFile() (path string, explicit bool) {
	if f == nil {
		return DefaultFile, false
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "config" {
			explicit = true
		}
	})
	return f.configFile, explicit
}

// Apply overrides c with the flags that were set on the command line (found
// with flag.FlagSet.Visit); call it after fs.Parse. A nil *Flags changes
// nothing.
func (f *Flags) Apply(c *Config) error {
	if f == nil {
		return nil
	}
	var errs []error
	f.fs.Visit(func(fl *flag.Flag) {
		v, ok := f.values[fl.Name]
		if !ok {
			return
		}
		if err := v.s.set(c, v.raw); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", fl.Name, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("apply flags: %w", errors.Join(errs...))
	}
	return nil
}

// Load builds the configuration in the contract's precedence: Default, then
// the YAML file (--config, else DefaultFile when it exists), then the
// environment through lookup, then the flags that were set, then Finalize.
// flags may be nil (no flags: DefaultFile when present) and lookup may be nil
// (no environment). Load does not validate: call ValidateFor with the
// command. A missing explicit --config file is an error; a missing
// DefaultFile is not.
func Load(flags *Flags, lookup LookupEnv) (Config, error) {
	c := Default()
	path, explicit := flags.ConfigFile()
	if err := c.LoadFile(path); err != nil {
		if explicit || !errors.Is(err, fs.ErrNotExist) {
			return Config{}, fmt.Errorf("load config: %w", err)
		}
	}
	if err := c.ApplyEnv(lookup); err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	if err := flags.Apply(&c); err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	if err := c.LoadTenantKeys(); err != nil {
		return Config{}, fmt.Errorf("load config: %w", err)
	}
	c.Finalize()
	return c, nil
}
