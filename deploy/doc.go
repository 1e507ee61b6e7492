// Package deploy holds no code: it is where the deployment artefacts live
// (prometheus/ alerting rules and their promtool unit tests, grafana/ the
// dashboard) and where Go tests check them against what the worker really
// exports. Those tests must never skip under CI=true for want of promtool
// or prometheus: .ci/run installs them.
package deploy
