// The agent both Node programs run: a mock model from ai/test drives a two-step tool loop (a tool
// call, then the answer) under a system prompt, at temperature 0.3. Nothing is sent anywhere but the spans.
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';

const usage = {
  inputTokens: { total: 12, noCache: 12, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 7, text: 7, reasoning: undefined },
};

export async function billingAgent() {
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
  console.log(JSON.stringify({ text: result.text, steps: result.steps.length }));
}
