// A TypeScript-world agent as a newcomer writes it: the Vercel AI SDK 7 with its OpenTelemetry
// integration (@ai-sdk/otel) and the OpenTelemetry JS SDK exporting OTLP/HTTP to blackbox.
// A mock model from ai/test drives a two-step tool loop (a tool call, then the answer) under a
// system prompt, at temperature 0.3. Usage: node agent.mjs ENDPOINT proto|json SERVICE_NAME
import { trace, context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { OpenTelemetry } from '@ai-sdk/otel';
import { generateText, jsonSchema, registerTelemetry, stepCountIs, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';

const [endpoint, encoding, serviceName] = process.argv.slice(2);
const Exporter = encoding === 'json' ? JsonExporter : ProtoExporter;
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const provider = new TracerProvider({
  resource: resourceFromAttributes({ 'service.name': serviceName }),
  spanProcessors: [new BatchSpanProcessor({ exporter: new Exporter({ url: endpoint }) })],
});
trace.setGlobalTracerProvider(provider);
registerTelemetry(new OpenTelemetry());

const usage = {
  inputTokens: { total: 12, noCache: 12, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 7, text: 7, reasoning: undefined },
};
let calls = 0;
const model = new MockLanguageModelV4({
  modelId: 'mock-invoice-model',
  doGenerate: async () => {
    calls += 1;
    if (calls === 1) {
      return {
        content: [{ type: 'tool-call', toolCallId: 'call_inv_9', toolName: 'getInvoice', input: '{"invoiceId":"inv_9"}' }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    }
    return {
      content: [{ type: 'text', text: 'Invoice inv_9 totals 120.00 EUR.' }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage,
      warnings: [],
    };
  },
});

const result = await generateText({
  model,
  system: 'You are the billing assistant. Answer in one sentence.',
  prompt: 'How much is invoice inv_9?',
  temperature: 0.3,
  tools: {
    getInvoice: tool({
      description: 'An invoice by id',
      inputSchema: jsonSchema({ type: 'object', properties: { invoiceId: { type: 'string' } }, required: ['invoiceId'] }),
      execute: async ({ invoiceId }) => ({ invoiceId, total: '120.00 EUR' }),
    }),
  },
  stopWhen: stepCountIs(2),
});
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify({ text: result.text, steps: result.steps.length }));
