// A TypeScript-world agent as a newcomer writes it: the Vercel AI SDK 7 with its OpenTelemetry
// integration (@ai-sdk/otel) and the OpenTelemetry JS SDK exporting OTLP/HTTP to blackbox, with
// the protobuf or the JSON exporter. Usage: node agent.mjs ENDPOINT proto|json SERVICE_NAME
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { OpenTelemetry } from '@ai-sdk/otel';
import { registerTelemetry } from 'ai';
import { billingAgent } from './loop.mjs';

const [endpoint, encoding, serviceName] = process.argv.slice(2);
const Exporter = encoding === 'json' ? JsonExporter : ProtoExporter;
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const provider = new TracerProvider({
  resource: resourceFromAttributes({ 'service.name': serviceName }),
  spanProcessors: [new BatchSpanProcessor({ exporter: new Exporter({ url: endpoint }) })],
});
trace.setGlobalTracerProvider(provider);
registerTelemetry(new OpenTelemetry());

await billingAgent();
await provider.shutdown();
