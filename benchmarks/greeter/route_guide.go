package main

// RouteGuide, gRPC's example service, served from its descriptors (route_guide.protoset) with
// dynamic messages, so no generated code is needed and the server describes exactly the
// descriptors a client loads from route_guide.proto or the protoset.
//
// GetFeature answers the feature at a point (an unnamed feature where there is none);
// ListFeatures streams the features inside a rectangle; RecordRoute answers a stream of points
// with their count, the named features among them and the distance covered; RouteChat answers
// every note with itself (gRPC's example answers with the earlier notes at the same place,
// whose number varies; one reply per note suits a ping-pong stream).

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

//go:embed route_guide.protoset
var routeGuideSet []byte

//go:embed route_guide_db.json
var routeGuideDB []byte

type routeGuide struct {
	point, rect, feature, summary protoreflect.MessageDescriptor
	lat, lon                      protoreflect.FieldDescriptor
	fName, fLocation, lo, hi      protoreflect.FieldDescriptor
	count, features, distance     protoreflect.FieldDescriptor
	byPoint                       map[[2]int32]*dynamicpb.Message
	all                           []*dynamicpb.Message
}

// newRouteGuide reads the embedded descriptors (registered for the reflection service too) and
// features.
func newRouteGuide() (*routeGuide, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(routeGuideSet, &set); err != nil {
		return nil, fmt.Errorf("route_guide.protoset: %w", err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("route_guide.protoset: %w", err)
	}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		err = protoregistry.GlobalFiles.RegisterFile(fd)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName("routeguide.RouteGuide")
	if err != nil {
		return nil, err
	}
	methods := d.(protoreflect.ServiceDescriptor).Methods()
	g := &routeGuide{
		point:   methods.ByName("GetFeature").Input(),
		feature: methods.ByName("GetFeature").Output(),
		rect:    methods.ByName("ListFeatures").Input(),
		summary: methods.ByName("RecordRoute").Output(),
		byPoint: map[[2]int32]*dynamicpb.Message{},
	}
	g.lat, g.lon = g.point.Fields().ByName("latitude"), g.point.Fields().ByName("longitude")
	g.fName, g.fLocation = g.feature.Fields().ByName("name"), g.feature.Fields().ByName("location")
	g.lo, g.hi = g.rect.Fields().ByName("lo"), g.rect.Fields().ByName("hi")
	sf := g.summary.Fields()
	g.count, g.features, g.distance = sf.ByName("point_count"), sf.ByName("feature_count"), sf.ByName("distance")
	var db []struct {
		Name     string
		Location struct{ Latitude, Longitude int32 }
	}
	if err := json.Unmarshal(routeGuideDB, &db); err != nil {
		return nil, fmt.Errorf("route_guide_db.json: %w", err)
	}
	for _, f := range db {
		p := g.newPoint(f.Location.Latitude, f.Location.Longitude)
		m := dynamicpb.NewMessage(g.feature)
		m.Set(g.fName, protoreflect.ValueOfString(f.Name))
		m.Set(g.fLocation, protoreflect.ValueOfMessage(p))
		g.byPoint[[2]int32{f.Location.Latitude, f.Location.Longitude}] = m
		g.all = append(g.all, m)
	}
	return g, nil
}

func (g *routeGuide) newPoint(lat, lon int32) *dynamicpb.Message {
	p := dynamicpb.NewMessage(g.point)
	p.Set(g.lat, protoreflect.ValueOfInt32(lat))
	p.Set(g.lon, protoreflect.ValueOfInt32(lon))
	return p
}

func (g *routeGuide) key(p protoreflect.Message) [2]int32 {
	return [2]int32{int32(p.Get(g.lat).Int()), int32(p.Get(g.lon).Int())}
}

func (g *routeGuide) getFeature(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := dynamicpb.NewMessage(g.point)
	if err := dec(in); err != nil {
		return nil, err
	}
	if f, ok := g.byPoint[g.key(in)]; ok {
		return f, nil
	}
	out := dynamicpb.NewMessage(g.feature)
	out.Set(g.fLocation, protoreflect.ValueOfMessage(in))
	return out, nil
}

func (g *routeGuide) listFeatures(_ any, stream grpc.ServerStream) error {
	rect := dynamicpb.NewMessage(g.rect)
	if err := stream.RecvMsg(rect); err != nil {
		return err
	}
	lo, hi := g.key(rect.Get(g.lo).Message()), g.key(rect.Get(g.hi).Message())
	for _, f := range g.all {
		at := g.key(f.Get(g.fLocation).Message())
		if min(lo[0], hi[0]) <= at[0] && at[0] <= max(lo[0], hi[0]) &&
			min(lo[1], hi[1]) <= at[1] && at[1] <= max(lo[1], hi[1]) {
			if err := stream.SendMsg(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// distance in metres between two E7 points (haversine, as gRPC's example computes it).
func distance(a, b [2]int32) int32 {
	rad := func(e7 int32) float64 { return float64(e7) / 1e7 * math.Pi / 180 }
	lat1, lat2 := rad(a[0]), rad(b[0])
	dlat, dlon := lat2-lat1, rad(b[1])-rad(a[1])
	h := math.Sin(dlat/2)*math.Sin(dlat/2) + math.Cos(lat1)*math.Cos(lat2)*math.Sin(dlon/2)*math.Sin(dlon/2)
	return int32(6371000 * 2 * math.Atan2(math.Sqrt(h), math.Sqrt(1-h)))
}

func (g *routeGuide) recordRoute(_ any, stream grpc.ServerStream) error {
	var count, features, metres int32
	var prev *[2]int32
	for {
		p := dynamicpb.NewMessage(g.point)
		err := stream.RecvMsg(p)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		at := g.key(p)
		count++
		if _, ok := g.byPoint[at]; ok {
			features++
		}
		if prev != nil {
			metres += distance(*prev, at)
		}
		prev = &at
	}
	out := dynamicpb.NewMessage(g.summary)
	out.Set(g.count, protoreflect.ValueOfInt32(count))
	out.Set(g.features, protoreflect.ValueOfInt32(features))
	out.Set(g.distance, protoreflect.ValueOfInt32(metres))
	return stream.SendMsg(out)
}

func (g *routeGuide) routeChat(_ any, stream grpc.ServerStream) error {
	note := dynamicpb.NewMessage(g.feature.ParentFile().Messages().ByName("RouteNote"))
	for {
		err := stream.RecvMsg(note)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.SendMsg(note); err != nil {
			return err
		}
	}
}

func (g *routeGuide) serviceDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "routeguide.RouteGuide",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "GetFeature", Handler: g.getFeature}},
		Streams: []grpc.StreamDesc{
			{StreamName: "ListFeatures", Handler: g.listFeatures, ServerStreams: true},
			{StreamName: "RecordRoute", Handler: g.recordRoute, ClientStreams: true},
			{StreamName: "RouteChat", Handler: g.routeChat, ServerStreams: true, ClientStreams: true},
		},
		Metadata: "route_guide.proto",
	}
}
