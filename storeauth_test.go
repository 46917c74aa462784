package comm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocomm/comm/internal/testkit"
	"github.com/gocomm/comm/rendezvous"
)

func TestResolveStoreAuth(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want bool
	}{
		{nil, false},
		{[]string{"GOCOMM_STORE_AUTH=1"}, false}, // no secret, nothing to authenticate with
		{[]string{"GOCOMM_SECRET=s"}, true},
		{[]string{"GOCOMM_SECRET=s", "GOCOMM_STORE_AUTH=on"}, true},
		{[]string{"GOCOMM_SECRET=s", "GOCOMM_STORE_AUTH=0"}, false},
		{[]string{"GOCOMM_SECRET=s", "GOCOMM_STORE_AUTH=off"}, false},
	} {
		cfg, err := resolve(Options{Getenv: envOf(tt.env...)})
		if err != nil || cfg.storeAuth != tt.want {
			t.Errorf("%v: storeAuth %v, %v; want %v", tt.env, cfg.storeAuth, err, tt.want)
		}
	}
	_, err := resolve(Options{Getenv: envOf("GOCOMM_SECRET=s", "GOCOMM_STORE_AUTH=maybe")})
	if !errors.Is(err, ErrEnvironment) || !strings.Contains(fmt.Sprint(err), "GOCOMM_STORE_AUTH") {
		t.Errorf("GOCOMM_STORE_AUTH=maybe: %v", err)
	}
}

// With GOCOMM_SECRET, the store rank 0 hosts refuses a client without the
// secret while the job goes on; with GOCOMM_STORE_AUTH=0 a plain (torch)
// client is served.
func TestInitStoreRequiresSecret(t *testing.T) {
	for _, auth := range []string{"1", "0"} {
		t.Run("GOCOMM_STORE_AUTH="+auth, func(t *testing.T) {
			port := strconv.Itoa(testkit.FreePort(t))
			w := initWorld(t, 2, func(r int) []string {
				return []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK=" + strconv.Itoa(r), "LOCAL_WORLD_SIZE=2",
					"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "GOCOMM_SECRET=job-secret", "GOCOMM_STORE_AUTH=" + auth}
			})
			defer closeWorld(t, w)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// A client without the secret: refused at dial (a client that
			// probes the dialect) or at its first request.
			n, err := func() (int64, error) {
				stranger, err := rendezvous.DialTCPStore(ctx, "127.0.0.1:"+port)
				if err != nil {
					return 0, err
				}
				defer stranger.Close()
				return stranger.NumKeys(ctx)
			}()
			refused := errors.Is(err, rendezvous.ErrConnectionLost) || errors.Is(err, rendezvous.ErrProtocol)
			if auth == "1" && !refused {
				t.Errorf("a client without the secret read the store: %d keys, %v", n, err)
			}
			if auth == "0" && (err != nil || n == 0) {
				t.Errorf("a plain client with GOCOMM_STORE_AUTH=0: %d keys, %v", n, err)
			}
			if auth == "1" {
				if _, err := rendezvous.DialTCPStore(ctx, "127.0.0.1:"+port, rendezvous.WithSecret([]byte("guess"))); !errors.Is(err, rendezvous.ErrAuth) {
					t.Errorf("a client with another secret: %v", err)
				}
			}
			allReduceAll(t, w)
		})
	}
}
