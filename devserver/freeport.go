package devserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"sync"
)

// portPicker hands out distinct free TCP ports on one host.
type portPicker struct {
	host string
	used map[int]bool
	// small: only ports below 32768. The PostgreSQL schema keeps a service's
	// membership port in a SMALLINT (cluster_membership.rpc_port), and the
	// OS's ephemeral ports are above that on Linux.
	small bool
}

// Ports that a small portPicker draws from (random, checked free).
const smallPortLow, smallPortHigh = 20000, 32767

// smallTaken are the small ports this process has handed out: a port is
// checked free, then bound later by the server, so two servers started at
// once in one process (parallel tests) could otherwise draw the same one
// and the second fail with "address already in use". Ports above 32767
// come from the OS (freePort), which does not hand one out twice.
var smallTaken = &portSet{ports: map[int]bool{}}

// portSet is a set of ports, safe for concurrent use.
type portSet struct {
	mu    sync.Mutex
	ports map[int]bool
}

// take adds port, reporting false if it was there already.
func (s *portSet) take(port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ports[port] {
		return false
	}
	s.ports[port] = true
	return true
}

// give removes port.
func (s *portSet) give(port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ports, port)
}

func newPortPicker(host string) *portPicker {
	return &portPicker{host: host, used: map[int]bool{}}
}

// next returns a free port that this picker has not returned before.
func (p *portPicker) next() (int, error) {
	if p.small {
		return p.nextSmall()
	}
	for range 20 {
		port, err := freePort(p.host)
		if err != nil {
			return 0, err
		}
		if !p.used[port] {
			p.used[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free TCP port on %s", p.host)
}

// nextSmall returns a free port in smallPortLow..smallPortHigh that this
// picker has not returned before.
func (p *portPicker) nextSmall() (int, error) {
	for range 200 {
		port := smallPortLow + rand.IntN(smallPortHigh-smallPortLow+1)
		if p.used[port] || !smallTaken.take(port) {
			continue
		}
		if checkPortFree(p.host, port) != nil {
			smallTaken.give(port)
			continue
		}
		p.used[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free TCP port on %s in %d..%d", p.host, smallPortLow, smallPortHigh)
}

// freePort asks the OS for a free port on host.
//
// The port is bound, a connection is made to it and closed from the listening
// side, which leaves the port in TIME_WAIT: on Linux and the BSDs (which
// randomize ephemeral ports) the OS then does not hand the same port out for
// another bind(:0) for a while, yet an explicit bind with SO_REUSEADDR (what
// Go's listeners use) succeeds. This is the temporal CLI's approach.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer l.Close()
	addr := l.Addr().(*net.TCPAddr)
	if runtime.GOOS != "darwin" && runtime.GOOS != "windows" {
		c, err := net.DialTCP("tcp", nil, addr)
		if err != nil {
			return 0, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		s, err := l.Accept()
		if err != nil {
			_ = c.Close()
			return 0, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		_ = s.Close() // close from the server side first: TIME_WAIT stays on this port
		_ = c.Close()
	}
	return addr.Port, nil
}

// checkPortFree reports an error when host:port cannot be bound right now.
func checkPortFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}
