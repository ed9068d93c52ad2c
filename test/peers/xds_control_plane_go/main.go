// xds_control_plane_go: a real xDS control plane for ferry's xDS tests (test/xds_interop_test.cc):
// go-control-plane's snapshot cache (pkg/cache/v3) served over ADS, state of the world, by its
// pkg/server/v3, on 127.0.0.1. The test drives it through stdin, one command a line, and reads
// one answer line for each on stdout (the first line is "port N"):
//
//	snapshot VERSION JSON   sets the resources every node sees (JSON below) -> "ok" | "error ..."
//	stop                    closes the listener and every stream (a control plane gone) -> "ok"
//	start                   listens again on the same port, with the same cache -> "ok"
//	streams                 ADS streams opened so far -> "N"
//	nacks                   NACKs received so far -> "N"
//	last_nack               the last NACK's "TYPE_URL ERROR_MESSAGE" (one line) -> "..." | "-"
//	acked TYPE              the last version the client ACKed for TYPE (lds, rds, cds, eds) -> "V" | "-"
//	first_version TYPE      version_info of the first TYPE request on the newest stream -> "V" | "-"
//
// The JSON names what the snapshot holds, each resource built here as gRPC's xDS client expects
// (gRFC A27) unless asked to be invalid:
//
//	{"listeners": [{"name": "svc", "rds": "route-a"} | {"name": "svc", "routes": [ROUTE...]}
//	               | {"name": "bad", "no_api_listener": true}],
//	 "routes":    [{"name": "route-a", "domains": ["*"], "routes": [ROUTE...],
//	               "retry_policy": RETRY}],
//	 "clusters":  [{"name": "c", "service_name": "", "type": "EDS"|"STATIC", "lb_policy": "ROUND_ROBIN"|"MAGLEV",
//	                "max_requests": N,  (gRFC A32: circuit_breakers, DEFAULT priority)
//	                "outlier_detection": {"interval_ms": N, "base_ejection_time_ms": N,  (gRFC A50)
//	                    "max_ejection_percent": N, "failure_percentage_threshold": N,
//	                    "enforcing_failure_percentage": N, "failure_percentage_minimum_hosts": N,
//	                    "failure_percentage_request_volume": N, "enforcing_success_rate": N}}],
//	 "endpoints": [{"name": "c", "localities": [{"priority": 0, "weight": 1, "addresses": ["127.0.0.1:5000"]}]}]}
//	ROUTE: {"prefix": "/" | "path": "/s/M" | "regex": "...", "cluster": "c"
//	        | "weighted": [{"cluster": "c", "weight": 3}, ...],
//	        "headers": [{"name": "x-h", "exact": "v" | "prefix": "v" | "present": true, "invert": false}],
//	        "max_stream_duration_ms": 300, "grpc_timeout_header_max_ms": 0, "retry_policy": RETRY}
//	RETRY: {"retry_on": "unavailable,5xx", "num_retries": 2, "base_interval_ms": 10, "max_interval_ms": 50}
//
// A listener's "max_stream_duration_ms" is its HttpConnectionManager's
// common_http_protocol_options.max_stream_duration (gRFC A31's default for its routes); a
// ROUTE's are its RouteAction.max_stream_duration's max_stream_duration and
// grpc_timeout_header_max; RETRY is a RetryPolicy (gRFC A44), on a route's action or on the
// route configuration's virtual host. Durations are milliseconds, negative ones allowed (for
// validation tests); fields left out are left unset.
//
// A NACK is not answered with the snapshot it refused: go-control-plane's snapshot cache compares
// the request's version_info (a NACK carries the last version the client accepted) with the
// snapshot's and resends at once when they differ, for ever. As a control plane should, this one
// waits for a new snapshot instead: the NACK's version is taken to be the refused one.
//
// Runs until stdin closes. With -snapshot FILE it serves that JSON file's resources (the JSON
// above, as version -version) from the start and reads no commands: it runs until SIGINT or
// SIGTERM (examples/xds runs it so, beside the example's servers and client).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type headerSpec struct {
	Name    string  `json:"name"`
	Exact   *string `json:"exact"`
	Prefix  *string `json:"prefix"`
	Present *bool   `json:"present"`
	Invert  bool    `json:"invert"`
}

// gRFC A44's RetryPolicy fields; nil ones are left unset.
type retrySpec struct {
	RetryOn        string  `json:"retry_on"`
	NumRetries     *uint32 `json:"num_retries"`
	BaseIntervalMs *int64  `json:"base_interval_ms"`
	MaxIntervalMs  *int64  `json:"max_interval_ms"`
}

func millis(ms int64) *durationpb.Duration {
	return durationpb.New(time.Duration(ms) * time.Millisecond)
}

func buildRetryPolicy(r *retrySpec) *route.RetryPolicy {
	if r == nil {
		return nil
	}
	p := &route.RetryPolicy{RetryOn: r.RetryOn}
	if r.NumRetries != nil {
		p.NumRetries = wrapperspb.UInt32(*r.NumRetries)
	}
	if r.BaseIntervalMs != nil || r.MaxIntervalMs != nil {
		p.RetryBackOff = &route.RetryPolicy_RetryBackOff{}
		if r.BaseIntervalMs != nil {
			p.RetryBackOff.BaseInterval = millis(*r.BaseIntervalMs)
		}
		if r.MaxIntervalMs != nil {
			p.RetryBackOff.MaxInterval = millis(*r.MaxIntervalMs)
		}
	}
	return p
}

type routeSpec struct {
	Headers  []headerSpec `json:"headers"`
	Prefix   *string      `json:"prefix"`
	Path     *string      `json:"path"`
	Regex    *string      `json:"regex"`
	Cluster  string       `json:"cluster"`
	Weighted []struct {
		Cluster string `json:"cluster"`
		Weight  uint32 `json:"weight"`
	} `json:"weighted"`
	MaxStreamDurationMs    *int64     `json:"max_stream_duration_ms"`
	GrpcTimeoutHeaderMaxMs *int64     `json:"grpc_timeout_header_max_ms"`
	RetryPolicy            *retrySpec `json:"retry_policy"`
}

type spec struct {
	Listeners []struct {
		Name          string      `json:"name"`
		RDS           string      `json:"rds"`
		Routes        []routeSpec `json:"routes"`
		NoAPIListener bool        `json:"no_api_listener"`
		// gRFC A31's default for the listener's routes.
		MaxStreamDurationMs *int64 `json:"max_stream_duration_ms"`
	} `json:"listeners"`
	Routes []struct {
		Name        string      `json:"name"`
		Domains     []string    `json:"domains"`
		Routes      []routeSpec `json:"routes"`
		RetryPolicy *retrySpec  `json:"retry_policy"`
	} `json:"routes"`
	Clusters []struct {
		Name        string `json:"name"`
		ServiceName string `json:"service_name"`
		Type        string `json:"type"`
		LbPolicy    string `json:"lb_policy"`
		// gRFC A32: circuit_breakers' DEFAULT threshold's max_requests.
		MaxRequests *uint32 `json:"max_requests"`
		// gRFC A50: outlier_detection, failure-percentage ejection.
		OutlierDetection *struct {
			IntervalMs          int64   `json:"interval_ms"`
			BaseEjectionTimeMs  int64   `json:"base_ejection_time_ms"`
			MaxEjectionPercent  *uint32 `json:"max_ejection_percent"`
			FailureThreshold    *uint32 `json:"failure_percentage_threshold"`
			FailureEnforcing    *uint32 `json:"enforcing_failure_percentage"`
			FailureMinimumHosts *uint32 `json:"failure_percentage_minimum_hosts"`
			FailureVolume       *uint32 `json:"failure_percentage_request_volume"`
			SuccessEnforcing    *uint32 `json:"enforcing_success_rate"`
		} `json:"outlier_detection"`
	} `json:"clusters"`
	Endpoints []struct {
		Name       string `json:"name"`
		Localities []struct {
			Priority  uint32   `json:"priority"`
			Weight    uint32   `json:"weight"`
			Addresses []string `json:"addresses"`
		} `json:"localities"`
	} `json:"endpoints"`
}

func buildRoutes(specs []routeSpec) ([]*route.Route, error) {
	var out []*route.Route
	for _, r := range specs {
		m := &route.RouteMatch{}
		switch {
		case r.Prefix != nil:
			m.PathSpecifier = &route.RouteMatch_Prefix{Prefix: *r.Prefix}
		case r.Path != nil:
			m.PathSpecifier = &route.RouteMatch_Path{Path: *r.Path}
		case r.Regex != nil:
			m.PathSpecifier = &route.RouteMatch_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: *r.Regex}}
		default:
			return nil, fmt.Errorf("a route needs prefix, path or regex")
		}
		for _, h := range r.Headers {
			hm := &route.HeaderMatcher{Name: h.Name, InvertMatch: h.Invert}
			switch {
			case h.Exact != nil:
				hm.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: &matcher.StringMatcher{
					MatchPattern: &matcher.StringMatcher_Exact{Exact: *h.Exact}}}
			case h.Prefix != nil:
				hm.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: &matcher.StringMatcher{
					MatchPattern: &matcher.StringMatcher_Prefix{Prefix: *h.Prefix}}}
			case h.Present != nil:
				hm.HeaderMatchSpecifier = &route.HeaderMatcher_PresentMatch{PresentMatch: *h.Present}
			default:
				return nil, fmt.Errorf("a header matcher needs exact, prefix or present")
			}
			m.Headers = append(m.Headers, hm)
		}
		action := &route.RouteAction{}
		if len(r.Weighted) > 0 {
			wc := &route.WeightedCluster{}
			for _, w := range r.Weighted {
				wc.Clusters = append(wc.Clusters, &route.WeightedCluster_ClusterWeight{
					Name: w.Cluster, Weight: wrapperspb.UInt32(w.Weight)})
			}
			action.ClusterSpecifier = &route.RouteAction_WeightedClusters{WeightedClusters: wc}
		} else {
			action.ClusterSpecifier = &route.RouteAction_Cluster{Cluster: r.Cluster}
		}
		if r.MaxStreamDurationMs != nil || r.GrpcTimeoutHeaderMaxMs != nil {
			action.MaxStreamDuration = &route.RouteAction_MaxStreamDuration{}
			if r.MaxStreamDurationMs != nil {
				action.MaxStreamDuration.MaxStreamDuration = millis(*r.MaxStreamDurationMs)
			}
			if r.GrpcTimeoutHeaderMaxMs != nil {
				action.MaxStreamDuration.GrpcTimeoutHeaderMax = millis(*r.GrpcTimeoutHeaderMaxMs)
			}
		}
		action.RetryPolicy = buildRetryPolicy(r.RetryPolicy)
		out = append(out, &route.Route{Match: m, Action: &route.Route_Route{Route: action}})
	}
	return out, nil
}

func ads() *core.ConfigSource {
	return &core.ConfigSource{ResourceApiVersion: core.ApiVersion_V3,
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}}
}

func build(s *spec) (map[resourcev3.Type][]types.Resource, error) {
	res := map[resourcev3.Type][]types.Resource{}
	routerAny, err := anypb.New(&router.Router{})
	if err != nil {
		return nil, err
	}
	for _, l := range s.Listeners {
		if l.NoAPIListener {
			res[resourcev3.ListenerType] = append(res[resourcev3.ListenerType], &listener.Listener{Name: l.Name})
			continue
		}
		manager := &hcm.HttpConnectionManager{
			HttpFilters: []*hcm.HttpFilter{{Name: "router",
				ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: routerAny}}},
		}
		if l.MaxStreamDurationMs != nil {
			manager.CommonHttpProtocolOptions = &core.HttpProtocolOptions{
				MaxStreamDuration: millis(*l.MaxStreamDurationMs)}
		}
		if l.RDS != "" {
			manager.RouteSpecifier = &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
				ConfigSource: ads(), RouteConfigName: l.RDS}}
		} else {
			routes, err := buildRoutes(l.Routes)
			if err != nil {
				return nil, err
			}
			manager.RouteSpecifier = &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
				Name:         l.Name + "-inline",
				VirtualHosts: []*route.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: routes}}}}
		}
		managerAny, err := anypb.New(manager)
		if err != nil {
			return nil, err
		}
		res[resourcev3.ListenerType] = append(res[resourcev3.ListenerType], &listener.Listener{
			Name: l.Name, ApiListener: &listener.ApiListener{ApiListener: managerAny}})
	}
	for _, r := range s.Routes {
		routes, err := buildRoutes(r.Routes)
		if err != nil {
			return nil, err
		}
		domains := r.Domains
		if len(domains) == 0 {
			domains = []string{"*"}
		}
		res[resourcev3.RouteType] = append(res[resourcev3.RouteType], &route.RouteConfiguration{
			Name: r.Name, VirtualHosts: []*route.VirtualHost{{Name: "vh", Domains: domains, Routes: routes,
				RetryPolicy: buildRetryPolicy(r.RetryPolicy)}}})
	}
	for _, c := range s.Clusters {
		out := &cluster.Cluster{Name: c.Name}
		switch c.Type {
		case "", "EDS":
			out.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_EDS}
			out.EdsClusterConfig = &cluster.Cluster_EdsClusterConfig{EdsConfig: ads(), ServiceName: c.ServiceName}
		case "STATIC":
			out.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_STATIC}
		default:
			return nil, fmt.Errorf("cluster type %q", c.Type)
		}
		if c.LbPolicy != "" {
			v, ok := cluster.Cluster_LbPolicy_value[c.LbPolicy]
			if !ok {
				return nil, fmt.Errorf("lb_policy %q", c.LbPolicy)
			}
			out.LbPolicy = cluster.Cluster_LbPolicy(v)
		}
		if c.MaxRequests != nil {
			out.CircuitBreakers = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{
				Priority: core.RoutingPriority_DEFAULT, MaxRequests: wrapperspb.UInt32(*c.MaxRequests)}}}
		}
		if od := c.OutlierDetection; od != nil {
			u32 := func(v *uint32) *wrapperspb.UInt32Value {
				if v == nil {
					return nil
				}
				return wrapperspb.UInt32(*v)
			}
			out.OutlierDetection = &cluster.OutlierDetection{
				MaxEjectionPercent:             u32(od.MaxEjectionPercent),
				FailurePercentageThreshold:     u32(od.FailureThreshold),
				EnforcingFailurePercentage:     u32(od.FailureEnforcing),
				FailurePercentageMinimumHosts:  u32(od.FailureMinimumHosts),
				FailurePercentageRequestVolume: u32(od.FailureVolume),
				EnforcingSuccessRate:           u32(od.SuccessEnforcing),
			}
			if od.IntervalMs != 0 {
				out.OutlierDetection.Interval = durationpb.New(time.Duration(od.IntervalMs) * time.Millisecond)
			}
			if od.BaseEjectionTimeMs != 0 {
				out.OutlierDetection.BaseEjectionTime = durationpb.New(time.Duration(od.BaseEjectionTimeMs) * time.Millisecond)
			}
		}
		res[resourcev3.ClusterType] = append(res[resourcev3.ClusterType], out)
	}
	for _, e := range s.Endpoints {
		cla := &endpoint.ClusterLoadAssignment{ClusterName: e.Name}
		for i, l := range e.Localities {
			loc := &endpoint.LocalityLbEndpoints{
				Locality:            &core.Locality{Region: "r", Zone: "z" + strconv.Itoa(i)},
				Priority:            l.Priority,
				LoadBalancingWeight: wrapperspb.UInt32(l.Weight),
			}
			for _, a := range l.Addresses {
				host, port, err := net.SplitHostPort(a)
				if err != nil {
					return nil, err
				}
				p, err := strconv.Atoi(port)
				if err != nil {
					return nil, err
				}
				loc.LbEndpoints = append(loc.LbEndpoints, &endpoint.LbEndpoint{
					HealthStatus: core.HealthStatus_HEALTHY,
					HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
						Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
							Address: host, PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(p)}}}}}}})
			}
			cla.Endpoints = append(cla.Endpoints, loc)
		}
		res[resourcev3.EndpointType] = append(res[resourcev3.EndpointType], cla)
	}
	return res, nil
}

// Every node sees the same snapshot.
type anyNode struct{}

func (anyNode) ID(*core.Node) string { return "all" }

var shortTypes = map[string]string{"lds": resourcev3.ListenerType, "rds": resourcev3.RouteType,
	"cds": resourcev3.ClusterType, "eds": resourcev3.EndpointType}

type stats struct {
	mu           sync.Mutex
	streams      int
	newest       int64
	sent         map[int64]map[string][2]string // stream -> type -> {nonce, version} last sent
	nacks        int
	lastNack     string
	acked        map[string]string
	firstVersion map[string]string // of the newest stream
}

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1 (0: any free one)")
	snapshotFile := flag.String("snapshot", "", "serve this JSON file's resources; no commands")
	snapshotVersion := flag.String("version", "1", "the version of -snapshot's resources")
	flag.Parse()

	ctx := context.Background()
	cache := cachev3.NewSnapshotCache(true, anyNode{}, nil)
	st := &stats{acked: map[string]string{}, firstVersion: map[string]string{},
		sent: map[int64]map[string][2]string{}}
	callbacks := serverv3.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.streams++
			st.newest = id
			st.firstVersion = map[string]string{}
			return nil
		},
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			st.mu.Lock()
			defer st.mu.Unlock()
			if id == st.newest {
				if _, seen := st.firstVersion[req.TypeUrl]; !seen {
					st.firstVersion[req.TypeUrl] = req.VersionInfo
				}
			}
			if req.ErrorDetail != nil {
				st.nacks++
				st.lastNack = req.TypeUrl + " " + strings.ReplaceAll(req.ErrorDetail.Message, "\n", " ")
				if last, ok := st.sent[id][req.TypeUrl]; ok && last[0] == req.ResponseNonce {
					req.VersionInfo = last[1]
				}
			} else if req.ResponseNonce != "" {
				st.acked[req.TypeUrl] = req.VersionInfo
			}
			return nil
		},
	}
	callbacks.StreamResponseFunc = func(_ context.Context, id int64, _ *discovery.DiscoveryRequest,
		resp *discovery.DiscoveryResponse) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.sent[id] == nil {
			st.sent[id] = map[string][2]string{}
		}
		st.sent[id][resp.TypeUrl] = [2]string{resp.Nonce, resp.VersionInfo}
	}
	callbacks.StreamClosedFunc = func(id int64, _ *core.Node) {
		st.mu.Lock()
		defer st.mu.Unlock()
		delete(st.sent, id)
	}
	xds := serverv3.NewServer(ctx, cache, callbacks)

	var server *grpc.Server
	listen := func() error {
		lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
		if err != nil {
			return err
		}
		*port = lis.Addr().(*net.TCPAddr).Port
		server = grpc.NewServer()
		discovery.RegisterAggregatedDiscoveryServiceServer(server, xds)
		go server.Serve(lis)
		return nil
	}
	if err := listen(); err != nil {
		log.Fatalf("listen: %v", err)
	}
	out := bufio.NewWriter(os.Stdout)
	reply := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	setSnapshot := func(version string, body []byte) error {
		var s spec
		if err := json.Unmarshal(body, &s); err != nil {
			return err
		}
		res, err := build(&s)
		if err != nil {
			return err
		}
		snap, err := cachev3.NewSnapshot(version, res)
		if err != nil {
			return err
		}
		return cache.SetSnapshot(ctx, "all", snap)
	}
	if *snapshotFile != "" {
		body, err := os.ReadFile(*snapshotFile)
		if err == nil {
			err = setSnapshot(*snapshotVersion, body)
		}
		if err != nil {
			log.Fatalf("%s: %v", *snapshotFile, err)
		}
		reply("port %d", *port)
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
		<-stop
		server.Stop()
		return
	}
	reply("port %d", *port)

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		cmd, rest, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "snapshot":
			version, body, _ := strings.Cut(rest, " ")
			if err := setSnapshot(version, []byte(body)); err != nil {
				reply("error %v", err)
			} else {
				reply("ok")
			}
		case "stop":
			server.Stop()
			reply("ok")
		case "start":
			if err := listen(); err != nil {
				reply("error %v", err)
			} else {
				reply("ok")
			}
		case "streams", "nacks", "last_nack", "acked", "first_version":
			st.mu.Lock()
			answer := "-"
			switch cmd {
			case "streams":
				answer = strconv.Itoa(st.streams)
			case "nacks":
				answer = strconv.Itoa(st.nacks)
			case "last_nack":
				if st.lastNack != "" {
					answer = st.lastNack
				}
			case "acked", "first_version":
				m := st.acked
				if cmd == "first_version" {
					m = st.firstVersion
				}
				if v, ok := m[shortTypes[rest]]; ok && v != "" {
					answer = v
				}
			}
			st.mu.Unlock()
			reply("%s", answer)
		default:
			reply("error unknown command %q", cmd)
		}
	}
	server.Stop()
}
