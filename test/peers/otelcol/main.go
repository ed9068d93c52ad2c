// otelcol_ferry: the OpenTelemetry Collector as ferry's OTLP test peer (test/otlp/), a distribution
// of the fewest components a test needs: the OTLP receiver (gRPC, which ferry's exporter calls)
// and the file exporter (OTLP JSON, one line per batch, which the test reads back). What the
// Collector builder would generate, written by hand so that no builder is installed; built by
// scripts/install_peers.sh from this module's pinned go.mod (all collector modules at one release).
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	var err error
	factories := otelcol.Factories{}
	if factories.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	// The Collector's own telemetry (its logs; the test config turns its metrics off).
	factories.Telemetry = otelconftelemetry.NewFactory()
	return factories, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol_ferry",
			Description: "OpenTelemetry Collector for ferry's tests (OTLP receiver, file exporter)",
			Version:     "ferry",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				DefaultScheme: "file",
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(), yamlprovider.NewFactory(),
				},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}
