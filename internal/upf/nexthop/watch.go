package nexthop

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var timeNow = time.Now

// subscription is the set of netlink subscriptions in the namespace. When
// one of them fails (for instance a socket overrun) all are renewed and the
// state is resynchronised.
type subscription struct {
	done    chan struct{}
	closing atomic.Bool
	routes  chan netlink.RouteUpdate
	neighs  chan netlink.NeighUpdate
	links   chan netlink.LinkUpdate
	started []func() // drains of the subscriptions that started
}

const subscriptionBuffer = 1 << 20 // socket receive buffer, bytes

func (r *Resolver) subscribe() (*subscription, error) {
	s := &subscription{
		done:   make(chan struct{}),
		routes: make(chan netlink.RouteUpdate, 64),
		neighs: make(chan netlink.NeighUpdate, 256),
		links:  make(chan netlink.LinkUpdate, 64),
	}
	ns := r.ns
	onErr := func(err error) {
		if !s.closing.Load() {
			r.log.Warn("netlink subscription", "err", err)
		}
	}
	err := netlink.RouteSubscribeWithOptions(s.routes, s.done, netlink.RouteSubscribeOptions{
		Namespace: &ns, ErrorCallback: onErr, ReceiveBufferSize: subscriptionBuffer,
	})
	if err == nil {
		s.started = append(s.started, func() { drain(s.routes) })
		err = netlink.NeighSubscribeWithOptions(s.neighs, s.done, netlink.NeighSubscribeOptions{
			Namespace: &ns, ErrorCallback: onErr, ReceiveBufferSize: subscriptionBuffer,
		})
	}
	if err == nil {
		s.started = append(s.started, func() { drain(s.neighs) })
		err = netlink.LinkSubscribeWithOptions(s.links, s.done, netlink.LinkSubscribeOptions{
			Namespace: &ns, ErrorCallback: onErr, ReceiveBufferSize: subscriptionBuffer,
		})
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("subscribing to netlink updates: %w", err)
	}
	s.started = append(s.started, func() { drain(s.links) })
	return s, nil
}

// close ends the subscriptions; their goroutines exit once their channels
// are drained.
func (s *subscription) close() {
	s.closing.Store(true)
	close(s.done)
	for _, d := range s.started {
		d()
	}
}

func drain[T any](ch <-chan T) {
	for range ch {
	}
}

// run applies the kernel's updates until Close.
func (r *Resolver) run(s *subscription) {
	defer close(r.done)
	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	var debounce <-chan time.Time
	routesChanged := func() {
		if debounce == nil {
			debounce = time.After(routeDebounce)
		}
	}
	locked := func(f func()) {
		r.mu.Lock()
		defer r.mu.Unlock()
		f()
	}
	resubscribe := func() {
		s.close()
		s = nil
	}
	for {
		if s == nil {
			var err error
			if s, err = r.subscribe(); err != nil {
				r.log.Error("renewing netlink subscriptions", "err", err)
				select {
				case <-r.stop:
					return
				case <-time.After(time.Second):
				}
				continue
			}
			locked(func() { r.logErr("resynchronising", r.resync()) })
		}
		select {
		case <-r.stop:
			s.close()
			return
		case _, ok := <-s.routes:
			if !ok {
				resubscribe()
				continue
			}
			routesChanged()
		case u, ok := <-s.neighs:
			if !ok {
				resubscribe()
				continue
			}
			locked(func() { r.neighUpdate(&u) })
		case u, ok := <-s.links:
			if !ok {
				resubscribe()
				continue
			}
			var relevant bool
			locked(func() { relevant = r.linkUpdate(&u) })
			if relevant {
				routesChanged()
			}
		case <-debounce:
			debounce = nil
			locked(func() { r.logErr("reading routes", r.recomputeRoutes()) })
		case <-resync.C:
			locked(func() { r.logErr("resynchronising", r.resync()) })
		}
	}
}

func (r *Resolver) logErr(what string, err error) {
	if err != nil {
		r.log.Error(what, "err", err)
	}
}

func (r *Resolver) neighUpdate(u *netlink.NeighUpdate) {
	k, info, ok := neighOf(&u.Neigh)
	if !ok {
		return
	}
	if u.Type == unix.RTM_DELNEIGH {
		delete(r.neighs, k)
	} else {
		r.neighs[k] = info
	}
	r.refreshSlots(false)
	r.syncHostRoute(k.ip)
}

// linkUpdate follows a link change; it reports whether the routes must be
// recomputed (a core interface came, went or changed).
func (r *Resolver) linkUpdate(u *netlink.LinkUpdate) bool {
	a := u.Link.Attrs()
	old, had := r.links[a.Index]
	if u.Header.Type == unix.RTM_DELLINK {
		delete(r.links, a.Index)
		for k := range r.neighs {
			if k.ifindex == a.Index {
				delete(r.neighs, k)
			}
		}
	} else {
		r.links[a.Index] = linkInfoOf(u.Link)
	}
	coreChanged := r.updateCore()
	r.refreshSlots(false)
	return coreChanged || had && r.core[old.name] || r.core[a.Name]
}
